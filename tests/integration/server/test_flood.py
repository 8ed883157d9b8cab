#!/usr/bin/env python3
"""A connection flood (issue 18): one client (127.0.0.2) opens far more keyless connections
than the server's connection limit and trickles bytes into their request heads to keep them
alive. The API must keep serving another client (127.0.0.1) meanwhile, the flood must get no
more than its per-client share, and its half-sent heads must be cut at the head deadline,
which trickling cannot extend."""
import resource
import socket
import threading
import time

from harness import check, main

LIMIT = 200        # limits.max_connections: the whole server
PER_CLIENT = 40    # limits.max_connections_per_client
FLOOD = 600        # three times the whole limit, from one address
CONFIG = ('providers = { supported = ["process"]; default = "process"; };\n'
          'limits = { max_connections = %d; max_connections_per_client = %d;\n'
          '           request_head_timeout_seconds = 1; };\n' % (LIMIT, PER_CLIENT))


class Flood:
    def __init__(self, port):
        self.port = port
        self.socks = []
        self.stop = False
        self.refused = 0

    def open_all(self):
        for _ in range(FLOOD):
            s = socket.socket()
            s.setblocking(False)
            s.bind(("127.0.0.2", 0))
            try:
                s.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            except OSError:
                self.refused += 1
                s.close()
                continue
            self.socks.append(s)
        time.sleep(0.3)
        for s in self.socks:
            try:
                s.send(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            except OSError:
                pass

    def trickle(self):
        while not self.stop:
            for s in self.socks:
                try:
                    s.send(b"a")
                except OSError:
                    pass
            time.sleep(0.2)

    def alive(self):
        """Flood connections the server still holds open (not closed nor reset)."""
        n = 0
        for s in self.socks:
            try:
                if s.recv(1, socket.MSG_PEEK) == b"":
                    continue  # closed by the server
                n += 1  # it answered something: count it as held
            except BlockingIOError:
                n += 1  # nothing to read: still open
            except OSError:
                continue  # reset
        return n


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


def test(new_server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))
    s = new_server(config_text=CONFIG, tag="flood")
    s.start()
    flood = Flood(s.port)
    flood.open_all()
    t = threading.Thread(target=flood.trickle, daemon=True)
    t.start()
    try:
        time.sleep(0.3)
        held = flood.alive()
        check(held <= PER_CLIENT, "the flood holds %d connections, its share is %d"
              % (held, PER_CLIENT))
        # the other client is served while the flood trickles on
        for i in range(5):
            r, dt = timed(lambda: s.request("GET", "/health", key=False, timeout=5))
            check(r.status == 200 and dt < 2, "health %d during the flood: %r in %.2f s"
                  % (i, r, dt))
            r, dt = timed(lambda: s.request("GET", "/v1/sandboxes", timeout=5))
            check(r.status == 200 and dt < 2, "list %d during the flood: %r in %.2f s"
                  % (i, r, dt))
            time.sleep(0.2)
        r = s.create()
        check(r.status == 202, "a create during the flood: %r" % r)
        # trickling does not extend the head deadline (1 s): the flood's connections are cut
        time.sleep(1.8)
        check(flood.alive() == 0, "half-sent heads outlived the deadline: %d" % flood.alive())
        # a keyless request is answered 401 and its connection closed
        c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        c.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n\r\n")
        out = b""
        while True:
            got = c.recv(65536)
            if not got:
                break
            out += got
        c.close()
        check(out.startswith(b"HTTP/1.1 401") and b"Connection: close" in out,
              "a 401 closes its connection: %r" % out[:200])
        check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
    finally:
        flood.stop = True
        t.join()
        for x in flood.socks:
            x.close()
    check(s.stop() == 0, "clean stop")


if __name__ == "__main__":
    main(test)
