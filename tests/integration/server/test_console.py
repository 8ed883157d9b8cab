#!/usr/bin/env python3
"""The web console (/console/, issue 17) in real headless Chromium over the DevTools protocol:
a real `sbx serve` (native provider, the `host` image; the process provider when this host
cannot make native sandboxes), sandboxes created through the API, one of them with hostile
values (an extension called `name`, another extension, its image and its logs hold
`<script>`, `<img onerror>` and `"onerror=` strings). The page must: ask for the key and keep
it off cookies, list the sandboxes, show the hostile values as text (no dialog opens, the
DOM's text equals the raw value), delete from the page (the API then says 404), run a command
and show its output, drive a PTY shell through the router's WebSocket (the key as a
subprotocol, never forwarded), list, upload and download files, show events and logs, and
the server page (providers, limits, secrets set and removed). Screenshots of the main pages
are written to the build directory (argv[2], else the current directory).

  argv[1] = the sbx binary (sbx-execd next to it)
"""
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "desktop"))
from cdp import Browser, HandshakeError, WebSocket  # noqa: E402
from harness import Skip, check, main, wait_for  # noqa: E402
from test_router import start_app  # noqa: E402
from test_desktop import png_rows  # noqa: E402
from test_view import MARK, bbox  # noqa: E402

CONFIG = 'providers = { supported = ["native", "process"]; default = "native"; };\n'
SCRIPT = "<script>alert(1)</script>"
ONERR = '"onerror=alert(1) x="'
IMG = "<img src=x onerror=alert(1)>"
SHOTS = sys.argv[2] if len(sys.argv) > 2 else os.getcwd()


def js(v):
    return json.dumps(v)


def check_http(s):
    """Headers, content types, routes and bad input, without a browser."""
    r = s.request("GET", "/console/", key=False)
    csp = r.header("Content-Security-Policy") or ""
    check(r.status == 200 and r.header("Content-Type") == "text/html; charset=utf-8",
          "the page: %r" % r)
    for d in ("default-src 'self'", "script-src 'self'", "style-src 'self'",
              "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"):
        check(d in csp, "CSP has %s: %r" % (d, csp))
    check("unsafe-inline" not in csp and "unsafe-eval" not in csp, "no unsafe-*: %r" % csp)
    check(r.header("X-Content-Type-Options") == "nosniff" and r.header("X-Frame-Options") ==
          "DENY", "nosniff and DENY: %r" % r.headers)
    check(r.header("Set-Cookie") is None, "no cookie")
    check(b"<script>" not in r.body and b"<style" not in r.body and b"style=" not in r.body and
          not re.search(rb"\son[a-z]+=", r.body), "no inline script, style or handler")
    check(s.request("GET", "/console", key=False).status == 200, "/console too")
    for f, t in (("console.js", "text/javascript"), ("console.css", "text/css")):
        r = s.request("GET", "/console/static/" + f, key=False)
        check(r.status == 200 and r.header("Content-Type").startswith(t) and
              r.header("X-Content-Type-Options") == "nosniff", "%s: %r" % (f, r))
    for bad, key in (("/console/static/../api-key", False), ("/console/static/nope.js", False),
                     ("/console/static/%2e%2e/api-key", False), ("/console/x", True)):
        r = s.request("GET", bad, key=key)
        check(r.status == 404 and set(r.json()) == {"code", "message"}, "%s: %r" % (bad, r))
    r = s.request("POST", "/console/")
    check(r.status == 405 and r.json()["code"], "POST /console/: %r" % r)
    js_text = s.request("GET", "/console/static/console.js", key=False).body
    for sink in (b"innerHTML", b"outerHTML", b"insertAdjacentHTML", b"document.write", b"eval("):
        check(sink not in js_text.replace(b"no innerHTML, insertAdjacentHTML or document.write",
                                          b""), "the console's script uses no %s" % sink)
    # GET /admin/server: the key, then its fields
    check(s.request("GET", "/v1/admin/server", key=False).status == 401, "server info needs key")
    check(s.request("GET", "/v1/admin/server", key="nope").status == 401, "wrong key")
    r = s.request("DELETE", "/v1/admin/server")
    check(r.status == 405 and set(r.json()) == {"code", "message"}, "DELETE server info: %r" % r)
    info = s.request("GET", "/v1/admin/server").json()
    check(info["version"] and info["providers"]["supported"] == ["native", "process"] and
          info["providers"]["default"] == "native" and info["limits"]["maxSandboxes"] > 0 and
          isinstance(info["images"], list) and "publicAddr" not in info, "server info %r" % info)
    print("ok   HTTP: CSP, nosniff, DENY, types, 404/405 {code,message}, /admin/server",
          flush=True)


def check_ws_key(s, sid):
    """The router takes the API key as a WebSocket subprotocol, and forwards neither it nor
    the marker: execd's PTY WebSocket answers with the marker picked by the router."""
    r = s.request("POST", "/v1/sandboxes/%s/proxy/44772/pty" % sid, {})
    check(r.status == 201, "pty: %r" % r)
    pty = r.json()["session_id"]
    url = "ws://127.0.0.1:%d/v1/sandboxes/%s/proxy/44772/pty/%s/ws" % (s.port, sid, pty)
    good = "sbx-api-key." + s.key.encode().hex()
    for protos, want in ((["sbx-console", "sbx-api-key." + "00" * 32], 401),
                         (["sbx-console", "sbx-api-key.zz"], 401),
                         (["sbx-console", "sbx-api-key." + s.key.encode().hex()[:-2]], 401),
                         (["sbx-console"], 401)):
        try:
            WebSocket(url, timeout=10, protocols=protos).close()
            raise AssertionError("let in with %r" % protos)
        except HandshakeError as e:
            check(e.status == want, "%r: %d" % (protos, e.status))
    # not a WebSocket upgrade: the subprotocol is no key for plain requests
    r = s.request("GET", "/v1/sandboxes/%s/proxy/44772/pty/%s" % (sid, pty), key=False,
                  headers={"Sec-WebSocket-Protocol": good})
    check(r.status == 401, "a plain GET with the key as a subprotocol: %r" % r)
    ws = WebSocket(url, timeout=10, protocols=["sbx-console", good])
    check(ws.protocol == "sbx-console", "the router answers sbx-console: %r" % ws.head)
    hello = json.loads(ws.recv())
    check(hello["type"] == "connected", "connected: %r" % hello)
    ws.close()
    s.request("DELETE", "/v1/sandboxes/%s/proxy/44772/pty/%s" % (sid, pty))
    # what the sandbox receives: the other subprotocols, never the key nor the marker (an app
    # in the sandbox echoes the request's headers)
    port = 18000 + os.getpid() % 1000
    start_app(s, sid, port)
    r = s.request("GET", "/v1/sandboxes/%s/proxy/%d/echo" % (sid, port), key=False, headers={
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Protocol": "sbx-console, chat, %s" % good})
    check(r.status == 200, "the echo through the router: %r" % r)
    seen = r.json()["headers"]
    check(seen.get("Sec-WebSocket-Protocol") == "chat" and s.key not in r.body.decode() and
          s.key.encode().hex() not in r.body.decode() and "OPEN-SANDBOX-API-KEY" not in seen,
          "the sandbox saw: %r" % seen)
    print("ok   router: the key as a WebSocket subprotocol (wrong, cut or absent: 401; never "
          "forwarded)", flush=True)


def text_of(page, sel):
    return page.eval("(() => { const e = document.querySelector(%s); return e ? e.textContent "
                     ": null; })()" % js(sel))


def click(page, sel):
    page.eval("document.querySelector(%s).click()" % js(sel))


def no_dialogs(page, where):
    d = page.dialogs()
    check(not d, "%s: a JavaScript dialog opened (an XSS): %r" % (where, d))
    check(page.eval("window.__pwned === undefined"), "%s: injected code ran" % where)


def shot(page, name):
    page.eval("document.getElementById('toast').className = ''")  # no toast over the page
    time.sleep(0.3)
    path = os.path.join(SHOTS, "console-%s.png" % name)
    with open(path, "wb") as f:
        f.write(page.screenshot())
    print("     screenshot %s" % path, flush=True)


def wait_page(page, expr, what, timeout=30):
    try:
        page.wait_for("!!(%s)" % expr, timeout)
    except TimeoutError:
        print("the page reported:\n  %s" % "\n  ".join(page.problems()[-20:]), flush=True)
        raise AssertionError("timed out: " + what)


def sign_in(page, s):
    wait_page(page, "document.body.dataset.view === 'login'", "the sign-in form")
    shot(page, "login")
    page.eval("document.getElementById('key').value = 'wrong'; "
              "document.getElementById('login').requestSubmit()")
    wait_page(page, "document.getElementById('login-error').textContent.includes('refused')",
              "a wrong key refused")
    page.eval("document.getElementById('key').value = %s; "
              "document.getElementById('login').requestSubmit()" % js(s.key))
    wait_page(page, "document.body.dataset.view === 'list'", "the list after sign-in")
    check(page.eval("document.cookie") == "", "no cookie: %r" % page.eval("document.cookie"))
    check(page.eval("sessionStorage.getItem('sbx-console-key')") == s.key, "key in the tab")
    check(page.eval("localStorage.length") == 0, "nothing in localStorage")


def check_list(page, s, ids, hostile):
    wait_page(page, "document.body.dataset.loaded === '1' && %s.every((id) => "
              "document.querySelector('tr.sandbox[data-id=\"' + id + '\"]'))" % js(ids),
              "every sandbox in the list")
    row = "tr.sandbox[data-id=%s]" % js(hostile)
    check(text_of(page, row + " .name") == SCRIPT, "the hostile name as text: %r" %
          text_of(page, row + " .name"))
    check(text_of(page, row + " td.image") == ONERR + IMG, "the hostile image as text: %r" %
          text_of(page, row + " td.image"))
    check(page.eval("document.querySelectorAll('script').length") == 1, "no script element added")
    check(page.eval("document.querySelectorAll('img').length") == 0, "no img element added")
    no_dialogs(page, "the list")
    # the filter
    page.eval("{ const t = document.getElementById('filter-text'); t.value = 'web-1'; "
              "t.dispatchEvent(new Event('input')); }")
    check(page.eval("document.querySelectorAll('tr.sandbox').length") == 1, "filtered to one")
    page.eval("{ const t = document.getElementById('filter-text'); t.value = ''; "
              "t.dispatchEvent(new Event('input')); }")
    print("ok   list: %d sandboxes, hostile values as text, filter" % len(ids), flush=True)


def check_failed(page, s, sid):
    """A Failed sandbox: its badge and reason; its status message (which quotes the hostile
    image name) as text on its page."""
    row = "tr.sandbox[data-id=%s]" % js(sid)
    check(text_of(page, row + " .badge") == "Failed" and
          text_of(page, row + " td.image") == SCRIPT + IMG, "the Failed row")
    page.eval("location.hash = %s" % js("#/sandbox/" + sid))
    want = s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["message"]
    wait_page(page, "document.querySelector('span.msg')", "the status message")
    check(text_of(page, "span.msg") == want and SCRIPT in want, "the message as text: %r" %
          text_of(page, "span.msg"))
    no_dialogs(page, "a Failed sandbox's page")
    page.eval("location.hash = '#/sandboxes'")
    wait_page(page, "document.querySelector(%s)" % js(row), "back to the list")
    print("ok   a Failed sandbox: badge, image and status message as text", flush=True)


def check_delete(page, s, sid):
    click(page, "tr.sandbox[data-id=%s] button[data-verb=delete]" % js(sid))
    wait_page(page, "document.querySelector('.modal button.danger')", "the confirmation")
    click(page, ".modal button.danger")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).status == 404,
             "the delete from the page", 30)
    wait_page(page, "!document.querySelector('tr.sandbox[data-id=%s]')" % js(sid),
              "the row gone")
    print("ok   delete from the page: the API says 404", flush=True)


def check_pause_resume(page, s, sid):
    click(page, "tr.sandbox[data-id=%s] button[data-verb=pause]" % js(sid))
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] ==
             "Paused", "pause from the page", 30)
    wait_page(page, "document.querySelector('tr.sandbox[data-id=%s] button[data-verb=resume]')"
              % js(sid), "the resume button")
    click(page, "tr.sandbox[data-id=%s] button[data-verb=resume]" % js(sid))
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] ==
             "Running", "resume from the page", 30)
    # stop (the files kept) and start again
    click(page, "tr.sandbox[data-id=%s] button[data-verb=stop]" % js(sid))
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] ==
             "Stopped", "stop from the page", 60)
    wait_page(page, "document.querySelector('tr.sandbox[data-id=%s] button[data-verb=start]')"
              % js(sid), "the start button")
    click(page, "tr.sandbox[data-id=%s] button[data-verb=start]" % js(sid))
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] ==
             "Running", "start from the page", 60)
    # renew: one day from now
    before = s.request("GET", "/v1/sandboxes/" + sid).json()["expiresAt"]
    click(page, "tr.sandbox[data-id=%s] button[data-verb=renew]" % js(sid))
    wait_page(page, "document.getElementById('renew-for')", "the renew dialog")
    page.eval("document.getElementById('renew-for').value = '86400'; "
              "document.querySelector('.modal button:not(.ghost)').click()")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["expiresAt"] > before,
             "renew from the page", 30)
    left = (time.mktime(time.strptime(s.request("GET", "/v1/sandboxes/" + sid).json()[
        "expiresAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(time.gmtime()))
    check(86000 < left <= 86400, "renewed for a day: %.0f s left" % left)
    print("ok   pause, resume, stop, start and renew from the page", flush=True)


def check_create(page, s, image, provider):
    before = {x["id"] for x in s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]}
    click(page, "#new-sandbox")
    wait_page(page, "document.getElementById('c-image')", "the create form")
    shot(page, "create")
    if image:  # the busybox image of the store, its own sleep
        page.eval("document.getElementById('c-image').value = %s; "
                  "document.getElementById('c-entrypoint').value = '[\"sleep\", \"3600\"]'"
                  % js(image))
    page.eval("document.getElementById('c-provider').value = %s" % js(provider))
    page.eval("document.getElementById('c-metadata').value = 'team=from-form'; "
              "document.getElementById('c-timeout').value = '900'; "
              "document.getElementById('create').requestSubmit()")
    wait_page(page, "!document.getElementById('create')", "the form closed", 60)
    items = s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]
    new = [x for x in items if x["id"] not in before]
    check(len(new) == 1 and new[0]["metadata"] == {"team": "from-form"} and
          new[0]["status"]["state"] == "Running" and new[0].get("expiresAt") and
          new[0]["image"]["uri"] == (image or "host") and new[0]["provider"] == provider,
          "created from the form: %r" % new)
    if image:
        out, _ = s.run(new[0]["id"], "ls /bin")
        check(out == ["busybox", "cat", "echo", "ls", "sh", "sleep"],
              "a sandbox of the busybox image (its /bin): %r" % out)
    print("ok   create from the form", flush=True)
    return new[0]["id"]


def check_sandbox_page(page, s, sid, base):
    page.eval("location.hash = %s" % js("#/sandbox/" + sid))
    wait_page(page, "document.getElementById('inspect') && "
              "document.getElementById('inspect').textContent.includes(%s)" % js(sid),
              "the overview")
    check(SCRIPT in text_of(page, "#inspect") and "<script" not in page.eval(
        "document.getElementById('inspect').innerHTML.replace(/&lt;script/g, '')"),
        "inspect shows the raw JSON as text")
    chips = page.eval("Array.from(document.querySelectorAll('.chips .chip'), (e) => "
                      "e.textContent)")
    check("note=" + ONERR in chips and "name=" + SCRIPT in chips, "extensions as text: %r" % chips)
    no_dialogs(page, "the overview")
    shot(page, "sandbox")
    # events and logs: the entrypoint printed a hostile line
    page.eval("location.hash = %s" % js("#/sandbox/%s/events" % sid))
    wait_page(page, "(document.getElementById('logs') || {}).textContent && "
              "document.getElementById('logs').textContent.includes(%s)" % js(IMG),
              "the container's log line", 30)
    check("lifecycle" in text_of(page, "#events") and "Running" in text_of(page, "#events"),
          "lifecycle events: %r" % text_of(page, "#events"))
    no_dialogs(page, "events and logs")
    shot(page, "events")
    print("ok   sandbox page: inspect, extensions, events, logs (hostile line as text)",
          flush=True)


def check_runner(page, sid):
    page.eval("location.hash = %s" % js("#/sandbox/%s/terminal" % sid))
    wait_page(page, "document.getElementById('run-command')", "the runner")
    page.eval("document.getElementById('run-command').value = "
              "'for i in 1 2 3; do echo line-$i; done; echo \"%s\" >&2; exit 3'; "
              "document.getElementById('run').requestSubmit()" % IMG.replace('"', '\\"'))
    wait_page(page, "document.getElementById('run-status').textContent === 'exit 3'",
              "the command's exit", 30)
    out = text_of(page, "#run-output")
    check(out == "line-1\nline-2\nline-3\n%s\n" % IMG, "the command's output: %r" % out)
    no_dialogs(page, "the runner")
    print("ok   command runner: streamed output, stderr, exit code", flush=True)


def check_terminal(page, sid):
    click(page, "#term-connect")
    wait_page(page, "document.getElementById('term-status').textContent.startsWith('connected')",
              "the terminal connected", 30)
    # keystrokes as a person types them: CDP key events on the focused terminal
    page.eval("document.getElementById('term').focus()")
    for ch in "echo term-$((6*7))":
        page.call("Input.dispatchKeyEvent", type="keyDown", key=ch, text=ch)
        page.call("Input.dispatchKeyEvent", type="keyUp", key=ch)
    page.call("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter",
              windowsVirtualKeyCode=13)
    page.call("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter",
              windowsVirtualKeyCode=13)
    wait_page(page, "document.getElementById('term').textContent.includes('term-42')",
              "the shell's answer in the terminal", 30)
    shot(page, "terminal")
    print("ok   terminal: a PTY shell through the router's WebSocket, typed into", flush=True)


def check_files(page, s, sid):
    weird = "/tmp/%s.txt" % IMG.replace("/", "")
    s.run(sid, "mkdir -p /tmp/console-dir && printf 'hello' > '%s'" % weird)
    page.eval("location.hash = %s" % js("#/sandbox/%s/files" % sid))
    wait_page(page, "document.querySelector('tr.file[data-path=%s]')" % js(weird),
              "the hostile file name listed")
    check(text_of(page, "tr.file[data-path=%s] .fname" % js(weird)) == os.path.basename(weird),
          "file name as text")
    no_dialogs(page, "the file list")
    # upload through the page (a File made in the page, set on the input)
    page.eval("""(() => {
        const dt = new DataTransfer();
        dt.items.add(new File(['uploaded from the console\\n'], 'from-console.txt'));
        const i = document.getElementById('upload');
        i.files = dt.files;
        i.dispatchEvent(new Event('change'));
    })()""")
    wait_page(page, "document.querySelector('tr.file[data-path=\"/tmp/from-console.txt\"]')",
              "the uploaded file listed", 30)
    out, _ = s.run(sid, "cat /tmp/from-console.txt")
    check(out == ["uploaded from the console"], "the upload's content: %r" % out)
    # download: the page fetches it with the key and hands the browser a blob
    page.eval("""{ window.__dl = null;
        const orig = URL.createObjectURL;
        URL.createObjectURL = (b) => { b.text().then((t) => { window.__dl = t; });
                                        return orig(b); }; }""")
    click(page, "tr.file[data-path=%s] button" % js(weird))
    wait_page(page, "window.__dl === 'hello'", "the download's content")
    shot(page, "files")
    # (with the process provider this /tmp is the host's)
    s.run(sid, "rm -rf /tmp/console-dir /tmp/from-console.txt '%s'" % weird)
    print("ok   files: hostile name as text, upload, download", flush=True)


def check_desktop_link(page, s, sid):
    """The Desktop tab of a sandbox without a desktop: a view token minted on demand, the viewer
    linked and framed (its page allows this origin to frame it; it says no desktop answers)."""
    page.eval("location.hash = %s" % js("#/sandbox/%s/desktop" % sid))
    wait_page(page, "document.getElementById('desktop-mint')", "the desktop tab")
    click(page, "#desktop-mint")
    wait_page(page, "document.getElementById('desktop-open')", "the viewer link")
    href = page.eval("document.getElementById('desktop-open').getAttribute('href')")
    check(re.match(r"^/desktop/view/%s#token=[0-9a-f]{64}$" % sid, href), "link %r" % href)
    check(page.eval("document.getElementById('desktop-open').rel") == "noopener noreferrer",
          "the link opens without an opener")
    wait_page(page, "(() => { const d = document.getElementById('desktop-frame').contentDocument;"
              " return d && d.title === 'sbx desktop' && d.body.dataset.state !== 'connecting';"
              " })()", "the viewer framed, and done trying")
    print("ok   desktop tab: a viewer link and frame with a view token of this sandbox",
          flush=True)


def check_desktop(page, s):
    """A sandbox created with a desktop: its tab shows the live desktop, connected."""
    missing = [p for p in ("Xvnc", "openbox", "xterm") if not shutil.which(p)]
    if missing:
        print("note: no desktop check (%s not installed)" % ", ".join(missing), flush=True)
        return None
    r = s.request("POST", "/v1/sandboxes", {"image": {"uri": "host"}, "timeout": 600,
                                            "entrypoint": ["sleep", "3600"],
                                            "provider": "native",
                                            "extensions": {"sbx.desktop": "true"}})
    if r.status != 202:
        print("note: no desktop check (no native desktop here: %r)" % r, flush=True)
        return None
    sid = r.json()["id"]
    def marker():
        r = s.request("GET", "/v1/sandboxes/%s/proxy/44772/desktop/windows" % sid)
        return r.status == 200 and any("marker" in w["title"] for w in r.json()["windows"])
    for attempt in (1, 2):  # an xterm usually shows within 5 s; once in a while it does not
        r = s.request("POST", "/v1/sandboxes/%s/proxy/44772/command" % sid,
                      {"command": "xterm -title marker -bg '#22aa44' -fg '#22aa44' "
                                  "-geometry 60x20+200+150", "background": True})
        check(r.status == 200, "xterm started: %r" % r)
        cmd = json.loads(r.body.decode().split("\n\n")[0])["text"]
        try:
            wait_for(marker, "the xterm's window on the desktop", 20)
            break
        except Exception:
            log = s.request("GET", "/v1/sandboxes/%s/proxy/44772/command/%s/logs?cursor=0" %
                            (sid, cmd))
            print("note: no xterm window after 20 s (attempt %d); its output: %r" %
                  (attempt, log.body[-500:]), flush=True)
            if attempt == 2:
                raise
    page.eval("location.hash = %s" % js("#/sandbox/%s/desktop" % sid))
    wait_page(page, "(() => { const f = document.getElementById('desktop-frame'); const d = f &&"
              " f.contentDocument; return d && d.body && d.body.dataset.state === 'connected';"
              " })()", "the live desktop connected in the console", 60)
    # the xterm's flat green, drawn by noVNC inside the console's frame
    end = time.time() + 30
    while True:
        w, h, rows, bpp = png_rows(page.screenshot())
        if bbox(w, h, rows, bpp, MARK) or time.time() > end:
            break
        time.sleep(0.5)
    if not bbox(w, h, rows, bpp, MARK):
        shot(page, "desktop-failed")
        raise AssertionError("the desktop's xterm is not drawn in the console: %r" %
                             page.problems()[-10:])
    shot(page, "desktop")
    print("ok   desktop: the live desktop in the sandbox page", flush=True)
    return sid


def check_server_page(page, s, image):
    page.eval("location.hash = '#/server'")
    wait_page(page, "document.querySelector('#providers tbody tr')", "the providers")
    names = page.eval("Array.from(document.querySelectorAll('#providers tbody tr td:first-child'),"
                      " (e) => e.textContent)")
    check(names == ["native", "process"], "providers: %r" % names)
    if image:
        imgs = page.eval("Array.from(document.querySelectorAll('#images tbody tr td:first-child'),"
                         " (e) => e.textContent)")
        check(imgs == [image], "images: %r" % imgs)
    # a secret set and removed from the page; its value never comes back
    page.eval("document.getElementById('secret-name').value = 'CONSOLE_TEST'; "
              "document.getElementById('secret-value').value = 's3cret-value'; "
              "document.getElementById('secret-set').requestSubmit()")
    wait_page(page, "Array.from(document.querySelectorAll('#secrets td'), (e) => e.textContent)"
              ".includes('CONSOLE_TEST')", "the secret listed")
    check(s.request("GET", "/v1/admin/secrets/CONSOLE_TEST").status == 200, "secret set")
    check("s3cret-value" not in page.eval("document.body.textContent"), "value not shown")
    shot(page, "server")
    click(page, "#secrets tbody button.danger")
    wait_page(page, "document.querySelector('.modal button.danger')", "the confirmation")
    click(page, ".modal button.danger")
    wait_for(lambda: s.request("GET", "/v1/admin/secrets/CONSOLE_TEST").status == 404,
             "the secret removed", 15)
    print("ok   server page: providers, limits, secrets set and removed", flush=True)


def busybox_image(s):
    """A one-layer `docker save` tar of the host's static busybox, imported into the server's
    image store as console/bb:1 (the server page lists it; the create form uses it)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        for d in ("bin", "tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(info)
        t.add("/bin/busybox", "bin/busybox")
        for applet in ("sh", "sleep", "ls", "cat", "echo"):
            info = tarfile.TarInfo("bin/" + applet)
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            t.addfile(info)
    layer = layer.getvalue()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    config = json.dumps({"architecture": arch, "os": "linux",
                         "config": {"Cmd": ["sh"], "Env": ["PATH=/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [
                             "sha256:" + hashlib.sha256(layer).hexdigest()]}}).encode()
    cname = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cname, "RepoTags": ["console/bb:1"],
                            "Layers": ["layer.tar"]}]).encode()
    path = os.path.join(s.tmp, "bb.tar")
    with tarfile.open(path, "w") as t:
        for name, data in ((cname, config), ("layer.tar", layer), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    r = subprocess.run([s.sbx, "image", "import", "--state-dir", s.state, path],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "image import: %r" % r)
    return "docker.io/console/bb:1"


def create(s, provider, **kw):
    body = {"image": {"uri": "host"}, "entrypoint": ["sleep", "3600"], "timeout": 600,
            "provider": provider}
    body.update(kw)
    r = s.request("POST", "/v1/sandboxes", body)
    check(r.status == 202, "create: %r" % r)
    return r.json()["id"]


def run(factory):
    if not shutil.which("chromium"):
        raise Skip("chromium is not installed")
    s = factory(config_text=CONFIG, tag="console")
    s.start()
    check_http(s)
    provider = "native"
    r = s.request("POST", "/v1/sandboxes", {"image": {"uri": "host"},
                                            "entrypoint": ["sleep", "3600"], "timeout": 600})
    if r.status != 202:
        print("note: no native sandbox on this host (%r): the process provider" % r, flush=True)
        provider = "process"
        plain = create(s, provider)
    else:
        plain = r.json()["id"]
    image = busybox_image(s) if provider == "native" else None
    web = create(s, provider, metadata={"name": "web-1", "team": "a"})
    # hostile values: the image (process: any string is accepted as an image name), an
    # extension called `name`, another extension, and a line in its logs
    hostile = create(s, "process", image={"uri": ONERR + IMG},
                     entrypoint=["sh", "-c", 'echo "%s"; sleep 3600' % IMG],
                     extensions={"name": SCRIPT, "note": ONERR})
    doomed = create(s, provider, metadata={"name": "doomed"})
    # a create that fails on an image name that is markup: a Failed record whose status
    # message holds the name
    failed = []
    if provider == "native":
        r = s.request("POST", "/v1/sandboxes", {"image": {"uri": SCRIPT + IMG}, "timeout": 600,
                                                "entrypoint": ["sleep", "3600"],
                                                "provider": "native"})
        failed = [x["id"] for x in s.request("GET", "/v1/sandboxes?state=Failed").json()["items"]
                  if x.get("image", {}).get("uri") == SCRIPT + IMG]
        check(r.status >= 400 and len(failed) == 1, "a Failed sandbox: %r %r" % (r, failed))
    check_ws_key(s, web)
    with Browser(1400, 1000) as b:
        page = b.open("http://127.0.0.1:%d/console/" % s.port)
        sign_in(page, s)
        ids = [plain, web, hostile, doomed] + failed
        check_list(page, s, ids, hostile)
        if failed:
            check_failed(page, s, failed[0])
        shot(page, "list")
        check_delete(page, s, doomed)
        check_pause_resume(page, s, web)
        made = check_create(page, s, image, provider)
        check_sandbox_page(page, s, hostile, web)
        check_runner(page, web)
        check_terminal(page, web)
        check_files(page, s, web)
        check_desktop_link(page, s, web)
        desk = check_desktop(page, s) if provider == "native" else None
        check_server_page(page, s, image)
        # the key goes with "Sign out"
        click(page, "#signout")
        wait_page(page, "document.body.dataset.view === 'login'", "signed out")
        check(page.eval("sessionStorage.length") == 0, "the key forgotten")
        no_dialogs(page, "the end")
        bad = [p for p in page.problems() if "dialog" in p or "Content Security Policy" in p or
               "exception" in p]
        check(not bad, "the page reported: %r" % bad)
    for sid in [plain, web, hostile, made, desk] + failed:
        if sid is None:
            continue
        s.request("DELETE", "/v1/sandboxes/" + sid)
    check(s.stop() == 0, "the server exits 0 (sanitizers): %s" % s.log())


if __name__ == "__main__":
    main(run)
