"""An HTTP app the router test starts *inside* a sandbox (through execd): SSE with gaps,
echo of body/headers/query, a large body, a body ended by EOF, a refusal sent before the
request body is read (then a close), a WebSocket echo, and raw response heads a hostile
sandbox could send (/raw/<name>: the router must refuse or sanitise them)."""
import base64
import hashlib
import http.server
import json
import socketserver
import sys
import time


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    RAW = {
        "bare-cr": b"HTTP/1.1 200 OK\r\nX-A: 1\rX-Injected: evil\r\nContent-Length: 2\r\n\r\nok",
        "fold": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok",
        "cl-te": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"2\r\nok\r\n0\r\n\r\n",
        "dup-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
        "bad-name": b"HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 2\r\n\r\nok",
        "nul": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
        "gzip-te": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok",
        "bad-status": b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
        "101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\n",
        "cookie": b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=stolen; Path=/\r\n"
                  b"Access-Control-Allow-Credentials: true\r\nClear-Site-Data: \"*\"\r\n"
                  b"Content-Type: text/html\r\nX-Kept: yes\r\nContent-Length: 5\r\n\r\nhello",
        "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nok\r\n0\r\n\r\n",
    }

    def do_GET(self):
        if self.path.startswith("/raw/"):
            self.wfile.write(self.RAW[self.path[5:]])
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path.startswith("/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                self.chunk(b'{"n":%d}\n\n' % i)
                time.sleep(0.7)
            self.chunk(b"")
        elif self.path.startswith("/big"):
            body = bytes(range(256)) * (5 * 4096)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path.startswith("/eof"):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until-eof")
            self.close_connection = True
        elif self.path.startswith("/ws"):
            self.websocket()
        else:
            self.echo(b"")

    def do_POST(self):
        if self.path.startswith("/early"):
            # refuse at once, without reading the body, and close (unread data: a reset)
            out = b'{"code":"TOO_BIG","message":"refused before the body"}'
            self.send_response(413)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(out)
            self.wfile.flush()
            self.close_connection = True
            return
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(n)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.echo(body)

    def echo(self, body):
        out = json.dumps({"path": self.path, "headers": dict(self.headers.items()),
                          "body": body.decode("latin-1")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            hdr = self.rfile.read(2)
            if len(hdr) < 2:
                return
            n = hdr[1] & 0x7F
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if hdr[0] & 0x0F == 8:
                return
            reply = b"echo:" + data
            self.wfile.write(bytes([0x81, len(reply)]) + reply)
            self.wfile.flush()


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
