"""The live view of a sandbox's desktop (issue 12): view tokens, the VNC stream as a WebSocket
through `sbx serve`, and the page (Debian's noVNC) opened in real headless Chromium, which must
show what the desktop shows (its pixels compared with the API's screenshot) and drive it (a
mouse move on the page moves the desktop's cursor). Then what a hostile client tries: no token,
a wrong one, another sandbox's, protocol violations, paths out of noVNC's directory.

  argv[1] = the sbx binary (sbx-execd next to it)
"""
import json
import os
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, HERE)
from cdp import Browser, HandshakeError, WebSocket  # noqa: E402
from harness import Skip, check, main, wait_for  # noqa: E402
from test_desktop import CONFIG, NEEDED, Desk, png_decode, png_rows  # noqa: E402

MARK = (0x22, 0xAA, 0x44)  # an xterm's background: a flat colour to find in both pictures


def bbox(w, h, rows, bpp, color, tol=6):
    """The bounding box (x0, y0, x1, y1) of the pixels of color, or None."""
    xs, ys = [], []
    for y in range(0, h, 2):
        row = rows[y]
        for x in range(0, w, 2):
            px = row[x * bpp:x * bpp + 3]
            if all(abs(px[i] - color[i]) <= tol for i in range(3)):
                xs.append(x)
                ys.append(y)
    return (min(xs), min(ys), max(xs), max(ys)) if xs else None


def mint(s, sid, body=None):
    r = s.request("POST", "/v1/sandboxes/%s/desktop/view" % sid, body if body else {})
    return r


def ws_url(s, sid):
    return "ws://127.0.0.1:%d/v1/sandboxes/%s/desktop/vnc" % (s.port, sid)


def refused(url, want, **kw):
    try:
        WebSocket(url, timeout=10, **kw).close()
    except HandshakeError as e:
        check(e.status == want, "want %d: %s" % (want, e))
        return json.loads(e.body.split(b"\r\n\r\n")[-1] or b"{}") if e.body else {}
    raise AssertionError("the handshake was accepted: %r" % kw)


def check_tokens_and_refusals(s, sid, other):
    r = mint(s, sid)
    check(r.status == 201, "mint: %r" % r)
    j = r.json()
    check(len(j["token"]) == 64 and j["protocol"] == "sbx-token." + j["token"] and
          j["path"] == "/desktop/view/%s#token=%s" % (sid, j["token"]) and
          j["url"].endswith(j["path"]) and j["websocket"].endswith("/desktop/vnc") and
          j["expiresAt"], "the mint's answer: %r" % j)
    token = j["token"]
    url = ws_url(s, sid)
    # refused: no credentials, a wrong token, another sandbox's token, a token as a query
    refused(url, 401, protocols=["binary"])
    refused(url, 401, protocols=["binary", "sbx-token." + "0" * 64])
    other_tok = mint(s, other).json()["token"]
    refused(url, 401, protocols=["binary", "sbx-token." + other_tok])
    refused(url + "?token=" + token, 401)
    # the mint itself needs the key; bad bodies and unknown sandboxes are named
    r = s.request("POST", "/v1/sandboxes/%s/desktop/view" % sid, {}, key="wrong")
    check(r.status == 401, "mint without the key: %r" % r)
    for body, field in (({"ttlSeconds": 0}, "ttlSeconds"), ({"ttlSeconds": "1h"}, "ttlSeconds"),
                        ({"ttlSeconds": 10 ** 9}, "ttlSeconds")):
        r = mint(s, sid, body)
        check(r.status == 400 and field in r.json()["message"], "mint %r: %r" % (body, r))
    r = mint(s, "7b0e0f1c-0000-4000-8000-000000000000")
    check(r.status == 404, "mint for an unknown sandbox: %r" % r)
    # not a WebSocket, a bad version or key: 400 naming it
    r = s.request("GET", "/v1/sandboxes/%s/desktop/vnc" % sid)
    check(r.status == 400 and r.json()["code"] == "DESKTOP::NOT_A_WEBSOCKET", "plain GET: %r" % r)
    for hdr, code in (({"Sec-WebSocket-Version": "8"}, "BAD_WEBSOCKET_VERSION"),
                      ({"Sec-WebSocket-Key": "short"}, "BAD_WEBSOCKET_KEY")):
        h = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        h.update(hdr)
        r = s.request("GET", "/v1/sandboxes/%s/desktop/vnc" % sid, headers=h)
        check(r.status == 400 and r.json()["code"] == "DESKTOP::" + code, "%r: %r" % (hdr, r))
    # a sandbox without a desktop: 409 that says how to start one
    e = refused(ws_url(s, other), 409, headers={"OPEN-SANDBOX-API-KEY": s.key})
    check(e.get("code") == "DESKTOP::NOT_RUNNING" and "desktop/start" in e.get("message", ""),
          "no desktop: %r" % e)
    print("ok   view tokens: minted with the key only; every other way in refused", flush=True)
    return token


def check_rfb_stream(s, sid, token):
    """The bridge carries RFB both ways, answers pings, and closes on protocol violations."""
    ws = WebSocket(ws_url(s, sid), protocols=["binary", "sbx-token." + token])
    check(ws.protocol == "binary", "the subprotocol picked: %r" % ws.protocol)
    ver = ws.recv()
    check(ver == b"RFB 003.008\n", "the VNC server's greeting: %r" % ver)
    ws.send(b"RFB 003.008\n")
    sec = ws.recv()
    check(sec[0] >= 1 and 1 in sec[1:], "security types offered, None among them: %r" % sec)
    ws.send(b"ping!", opcode=9)
    op, payload = ws.recv_frame()
    check(op == 10 and payload == b"ping!", "a ping is answered: %r" % ((op, payload),))
    ws.send(b"\x01")  # SecurityType None
    res = ws.recv()
    check(res == b"\x00\x00\x00\x00", "security result OK: %r" % res)
    ws.send(b"\x01")  # ClientInit, shared
    init = ws.recv()
    w, h = struct.unpack(">HH", init[:4])
    check((w, h) == (1280, 800), "ServerInit: the desktop's size: %r" % ((w, h),))
    ws.send(b"\x00" * 5, mask=False)  # clients must mask: the bridge closes with 1002
    op, payload = ws.recv_frame()
    check(op == 8 and struct.unpack(">H", payload[:2])[0] == 1002,
          "an unmasked frame ends it with 1002: %r" % ((op, payload),))
    ws.close()
    # with the API key instead of a token, and no subprotocol at all
    ws = WebSocket(ws_url(s, sid), headers={"OPEN-SANDBOX-API-KEY": s.key})
    check(ws.recv() == b"RFB 003.008\n" and ws.protocol is None, "with the API key")
    ws.close()
    # a frame over the limit (256 KiB) closes with 1009
    ws = WebSocket(ws_url(s, sid), protocols=["sbx-token." + token])
    check(ws.protocol == "sbx-token." + token, "a token-only offer gets the token protocol")
    ws.recv()
    ws.send(b"x" * (300 << 10))
    op, payload = ws.recv_frame()
    check(op == 8 and struct.unpack(">H", payload[:2])[0] == 1009,
          "an oversized frame ends it with 1009: %r" % ((op, payload[:8]),))
    ws.close()
    print("ok   the VNC stream as a WebSocket: RFB through, ping, 1002, 1009", flush=True)


def check_static(s):
    r = s.request("GET", "/desktop/novnc/core/rfb.js", key=False)
    check(r.status == 200 and r.header("Content-Type").startswith("text/javascript") and
          b"export default class RFB" in r.body, "noVNC's rfb.js: %r" % r)
    for bad in ("../vnc.html", "core/../../../etc/passwd", "core/%2e%2e/x.js", "app/ui.js",
                "core//rfb.js", "core/rfb.js.map", "vnc.html"):
        r = s.request("GET", "/desktop/novnc/" + bad, key=False)
        check(r.status == 404, "/desktop/novnc/%s refused: %r" % (bad, r))
    r = s.request("GET", "/desktop/static/../api-key")
    check(r.status == 404, "static traversal: %r" % r)
    print("ok   static files: noVNC's JavaScript only, nothing else", flush=True)


def open_connected(b, url):
    """The page, once noVNC says connected. (Chromium aborts loads with ERR_NETWORK_CHANGED
    when interfaces come and go on the host, as other tests' sandboxes' veths do: the page's
    boot.js then loads it again by itself, which this also tries.)"""
    page = b.open(url)
    try:
        page.wait_for("document.body.dataset.state === 'connected'", 60)
        return page
    except TimeoutError:
        try:
            said = page.eval("document.body.dataset.state + ': ' + "
                             "document.getElementById('status').textContent")
        except RuntimeError as e:
            said = "(no page: %s)" % e
        print("the page says %r; it reported:\n  %s" % (said, "\n  ".join(
            page.problems()[-20:])), flush=True)
        raise


def cli_view(s, sid):
    """`sbx desktop view ID`: the link a person opens (its token minted by the server)."""
    keyfile = os.path.join(s.tmp, "key")
    with open(keyfile, "w") as f:
        f.write(s.key)
    conn = ["-H", "http://127.0.0.1:%d" % s.port, "--api-key-file", keyfile]
    bad = subprocess.run([s.sbx, "desktop", "view"] + conn + ["--ttl", "5", sid],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode == 2 and "--ttl" in bad.stderr, "--ttl 5 is a usage error: %r" % bad)
    r = subprocess.run([s.sbx, "desktop", "view"] + conn + ["--ttl", "600", sid],
                       capture_output=True, text=True, timeout=60)
    url = r.stdout.strip()
    check(r.returncode == 0 and re.match(r"http://127\.0\.0\.1:%d/desktop/view/%s#token="
                                         r"[0-9a-f]{64}$" % (s.port, sid), url),
          "sbx desktop view: %r" % r)
    return url


def check_page(s, d, sid):
    d.bg("xterm -bg '#22aa44' -fg '#22aa44' -geometry 60x20+200+150 -title marker")
    d.window("marker")
    time.sleep(0.5)
    shot = png_decode(d.shot("?cursor=false").body)
    want = bbox(shot[0], shot[1], shot[2], 3, MARK)
    check(want is not None, "the marker window is on the desktop")
    r = s.request("GET", "/desktop/view/" + sid, key=False)
    csp = r.header("Content-Security-Policy") or ""
    check(r.status == 200 and "script-src 'self'" in csp and "frame-ancestors 'self'" in csp and
          r.header("X-Frame-Options") == "SAMEORIGIN",
          "the page and its CSP: %r %r" % (r, csp))
    url = cli_view(s, sid)
    with Browser(1280, 860) as b:
        page = open_connected(b, url)
        # noVNC's canvas holds the remote framebuffer at its own size: compare pixels
        page.wait_for("(() => { const c = document.querySelector('#screen canvas');"
                      " return c && c.width === 1280 && c.height === 800; })()", 10)
        x, y = (want[0] + want[2]) // 2, (want[1] + want[3]) // 2
        expr = ("Array.from(document.querySelector('#screen canvas').getContext('2d')"
                ".getImageData(%d, %d, 1, 1).data)" % (x, y))
        page.wait_for("(() => { const p = %s; return Math.abs(p[0]-%d) < 8 && Math.abs(p[1]-%d)"
                      " < 8 && Math.abs(p[2]-%d) < 8; })()" % ((expr,) + MARK), 10)
        png = page.screenshot()
        out = os.path.join(os.environ.get("SBX_TEST_ARTIFACTS", "/tmp"),
                           "sbx-desktop-view-%d.png" % os.getpid())
        with open(out, "wb") as f:
            f.write(png)
        print("     the page, as Chromium shows it: %s" % out, flush=True)
        w, h, rows, bpp = png_rows(png)
        got = bbox(w, h, rows, bpp, MARK)
        check(got is not None, "the marker window shows on the page")
        rect = page.eval("(() => { const r = document.querySelector('#screen canvas')"
                         ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height];"
                         " })()")
        sx, sy = rect[2] / 1280.0, rect[3] / 800.0
        expect = (rect[0] + want[0] * sx, rect[1] + want[1] * sy,
                  rect[0] + want[2] * sx, rect[1] + want[3] * sy)
        check(all(abs(a - b) <= 6 for a, b in zip(got, expect)),
              "the marker is where the desktop has it: page %r, expected %r" % (got, expect))
        # input: a mouse move on the page moves the desktop's pointer
        tx, ty = 640, 400
        page.call("Input.dispatchMouseEvent", type="mouseMoved",
                  x=rect[0] + tx * sx, y=rect[1] + ty * sy)
        wait_for(lambda: abs(d.ok("GET", "/desktop/cursor").json()["x"] - tx) <= 3 and
                 abs(d.ok("GET", "/desktop/cursor").json()["y"] - ty) <= 3,
                 "the desktop's cursor to follow the page's mouse", 10)
    print("ok   the page in headless Chromium shows the desktop and drives it", flush=True)


def test(new_server):
    for p in NEEDED:
        if not any(os.access(os.path.join(d, p), os.X_OK)
                   for d in os.environ.get("PATH", "/usr/bin").split(":")):
            raise Skip("%s not installed (scripts/deps.sh)" % p)
    if not os.path.exists("/usr/share/novnc/core/rfb.js"):
        raise Skip("novnc not installed (scripts/deps.sh)")
    if os.geteuid() != 0:
        raise Skip("native sandboxes need root")
    s = new_server(config_text=CONFIG, tag="view")
    s.start()
    r = s.create(extensions={"sbx.desktop": "1280x800"},
                 resourceLimits={"cpu": "2", "memory": "2Gi"})
    check(r.status in (200, 202), "create: %r" % r)
    sid = r.json()["id"]
    r = s.create()
    check(r.status in (200, 202), "create without a desktop: %r" % r)
    other = r.json()["id"]
    d = Desk(s, sid)
    wait_for(lambda: d.req("GET", "/desktop").json().get("state") == "running",
             "the desktop", 20)
    token = check_tokens_and_refusals(s, sid, other)
    check_rfb_stream(s, sid, token)
    check_static(s)
    check_page(s, d, sid)
    # the sandbox goes: its view goes with it
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    refused(ws_url(s, sid), 404, protocols=["sbx-token." + token])
    check(s.stop() == 0, "clean stop")
    print("ok   deleted: the view is refused", flush=True)


if __name__ == "__main__":
    main(test)
