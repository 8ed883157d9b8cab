#!/usr/bin/env python3
"""sbx-execd --install DEST: the binary copied to DEST (0755, the same bytes, no temp file
left), replacing a file already there; exit 0. A DEST in a missing directory fails (exit 1)
with a message naming it. What the kubernetes provider's init container runs.

--install-token SRC:DEST copies the token file too (0444, atomically); --access-token-file F
makes the daemon require that token and removes F before it serves anything (so no process
started in the sandbox can read it); an empty or missing file refuses to start (exit 2)."""
import filecmp
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def check(cond, what):
    if not cond:
        print("FAIL: %s" % what)
        sys.exit(1)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        dest = os.path.join(d, "sbx-execd")
        with open(dest, "w") as f:
            f.write("old")
        p = subprocess.run([binary, "--install", dest], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr))
        check(filecmp.cmp(binary, dest, shallow=False), "same bytes")
        check(stat.S_IMODE(os.stat(dest).st_mode) == 0o755, "mode 0755")
        check(os.listdir(d) == ["sbx-execd"], "no temp file left: %s" % os.listdir(d))
        v = subprocess.run([dest, "--version"], capture_output=True, text=True, timeout=30)
        check(v.returncode == 0 and v.stdout.startswith("sbx-execd "), "the copy runs")
        bad = os.path.join(d, "missing", "sbx-execd")
        p = subprocess.run([binary, "--install", bad], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 1 and "missing" in p.stderr, "a bad DEST fails: %r" % p.stderr)
        h = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        check("--install DEST" in h.stdout, "--help names --install")
    print("ok   --install")
    token_file(binary)
    print("ok   --install-token, --access-token-file")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port, token, path="/ping"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 headers={"X-EXECD-ACCESS-TOKEN": token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def token_file(binary):
    with tempfile.TemporaryDirectory() as d:
        secret = os.path.join(d, "secret")
        with open(secret, "w") as f:
            f.write("tok-from-a-secret\n")
        tokdir = os.path.join(d, "tok")
        os.mkdir(tokdir)
        dest = os.path.join(tokdir, "token")
        p = subprocess.run([binary, "--install", os.path.join(d, "x"), "--install-token",
                            "%s:%s" % (secret, dest)], capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, "--install-token: %s" % p.stderr)
        check(open(dest).read() == "tok-from-a-secret", "the token copied (trailing space cut)")
        check(stat.S_IMODE(os.stat(dest).st_mode) == 0o444, "mode 0444")
        check(os.listdir(tokdir) == ["token"], "no temp file: %s" % os.listdir(tokdir))
        p = subprocess.run([binary, "--install", os.path.join(d, "x"), "--install-token",
                            "%s:%s" % (os.path.join(d, "nope"), dest)], capture_output=True,
                           text=True, timeout=30)
        check(p.returncode == 1 and "nope" in p.stderr, "a missing SRC fails: %r" % p.stderr)
        p = subprocess.run([binary, "--install-token", "%s:%s" % (secret, dest)],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 2, "--install-token alone is refused: %r" % p.stderr)
        # the daemon: token from the file, the file gone before /ping answers
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k != "EXECD_ACCESS_TOKEN"}
        proc = subprocess.Popen([binary, "--listen", "127.0.0.1:%d" % port,
                                 "--state-dir", os.path.join(d, "st"),
                                 "--access-token-file", dest], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 20
            code = None
            while time.time() < deadline:
                try:
                    code = ping(port, "tok-from-a-secret")
                    break
                except OSError:
                    time.sleep(0.05)
            check(code == 200, "the daemon answers: %r" % code)
            check(not os.path.exists(dest), "the token file is removed")
            check(ping(port, "tok-from-a-secret", "/metrics") == 200,
                  "the file's token is accepted")
            check(ping(port, None, "/metrics") == 401 and ping(port, "wrong", "/metrics") == 401,
                  "and required")
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        empty = os.path.join(d, "empty")
        open(empty, "w").close()
        for f in (empty, os.path.join(d, "missing")):
            p = subprocess.run([binary, "--listen", "127.0.0.1:%d" % free_port(),
                                "--access-token-file", f], capture_output=True, text=True,
                               timeout=30)
            check(p.returncode == 2 and f in p.stderr,
                  "no token, no daemon (%s): %d %r" % (f, p.returncode, p.stderr))


if __name__ == "__main__":
    main()
