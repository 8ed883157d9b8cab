"""A FAKE Bearer token service in front of a real docker-registry (tests only).

Answers /v2/ requests without a valid token with 401 + `WWW-Authenticate: Bearer realm=...,
service=...,scope=...` (like Docker Hub), hands out tokens at /token (anonymous for public/*,
HTTP Basic for private/*), and forwards authorised requests to the real registry.
usage: fake_token.py PORT UPSTREAM USER PASSWORD LOGFILE
"""
import base64
import http.server
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

PORT, UPSTREAM, USER, PASSWORD, LOG = sys.argv[1:6]
TOKENS = {"public": "tok-public", "private": "tok-private"}


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", headers=None):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def token(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        scope = q.get("scope", [""])[0]
        with open(LOG, "a") as f:
            f.write("token scope=%s service=%s auth=%s\n" % (
                scope, q.get("service", [""])[0], "yes" if self.headers.get("Authorization") else "no"))
        want = "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
        if ":private/" in scope:
            if self.headers.get("Authorization") != want:
                return self.reply(401, b'{"details":"bad credentials"}')
            return self.reply(200, json.dumps({"token": TOKENS["private"]}).encode())
        return self.reply(200, json.dumps({"access_token": TOKENS["public"]}).encode())

    def v2(self):
        repo = self.path[4:].split("/manifests/")[0].split("/blobs/")[0]
        kind = "private" if repo.startswith("private/") else "public"
        if self.headers.get("Authorization") != "Bearer " + TOKENS[kind]:
            challenge = 'Bearer realm="http://127.0.0.1:%s/token",service="fake-registry",' \
                        'scope="repository:%s:pull"' % (PORT, repo)
            return self.reply(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                              {"WWW-Authenticate": challenge})
        req = urllib.request.Request(UPSTREAM + self.path,
                                     headers={"Accept": self.headers.get("Accept", "*/*")})
        try:
            with urllib.request.urlopen(req) as r:
                body, code, hdrs = r.read(), r.status, r.headers
        except urllib.error.HTTPError as e:
            body, code, hdrs = e.read(), e.code, e.headers
        keep = {k: hdrs[k] for k in ("Content-Type", "Docker-Content-Digest") if hdrs.get(k)}
        self.reply(code, body, keep)

    def do_GET(self):
        if self.path.startswith("/token"):
            return self.token()
        if self.path.startswith("/v2/"):
            return self.v2()
        return self.reply(404)


http.server.ThreadingHTTPServer(("127.0.0.1", int(PORT)), Handler).serve_forever()
