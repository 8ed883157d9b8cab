"""Desktops in real sandboxes (issue 12), through `sbx serve` and its router, as an agent would:
a native sandbox created with extensions["sbx.desktop"], Chromium on a local page, xterm, xev
as the X client that reports which keysyms and buttons arrive.

  argv[1] = the sbx binary (sbx-execd next to it)

Checked: the desktop is up when the create answers; PNG and JPEG screenshots decode, with
region, scale and the cursor; a click at the button's position (read from the accessibility
tree) changes the page, seen in the tree and in the pixels; typing reaches a focused terminal
('<' and '>' included: pyautogui on X11 types '>' for '<'); every computer_13 key name is
accepted and a sample arrives as the right keysym; hotkeys, drags and scrolls arrive as X
events in order; windows are listed, activated and closed; the clipboard round-trips with a
real application; Anthropic's computer-use actions; hostile input gets 4xx naming the field
and the desktop stays usable; a killed X server is restarted; desktop stop/start, sandbox
stop/start; nothing of the desktop is left after delete.
"""
import base64
import json
import os
import re
import struct
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from harness import Skip, check, main, wait_for  # noqa: E402

CONFIG = 'providers = { supported = ["native"]; default = "native"; };\n'
NEEDED = ["Xvnc", "openbox", "xterm", "xev", "chromium", "dbus-daemon", "ffprobe"]

# OSWorld's computer_13 KEYBOARD_KEYS (desktop_env/actions.py, pyautogui's KEY_NAMES): 193.
KEYBOARD_KEYS = (
    ["\t", "\n", "\r", " "] + list("!\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~")
    + """accept add alt altleft altright apps backspace browserback browserfavorites browserforward
    browserhome browserrefresh browsersearch browserstop capslock clear convert ctrl ctrlleft
    ctrlright decimal del delete divide down end enter esc escape execute f1 f10 f11 f12 f13 f14
    f15 f16 f17 f18 f19 f2 f20 f21 f22 f23 f24 f3 f4 f5 f6 f7 f8 f9 final fn hanguel hangul hanja
    help home insert junja kana kanji launchapp1 launchapp2 launchmail launchmediaselect left
    modechange multiply nexttrack nonconvert num0 num1 num2 num3 num4 num5 num6 num7 num8 num9
    numlock pagedown pageup pause pgdn pgup playpause prevtrack print printscreen prntscrn prtsc
    prtscr return right scrolllock select separator shift shiftleft shiftright sleep stop
    subtract tab up volumedown volumemute volumeup win winleft winright yen command option
    optionleft optionright""".split())

PAGE = """<!doctype html><html><head><title>before</title>
<style>body{margin:0;background:#ffffff} #b{position:absolute;left:300px;top:200px;width:200px;
height:80px;font-size:24px} #t{position:absolute;left:300px;top:400px;width:300px;height:60px}
</style></head><body>
<button id="b" onclick="document.body.style.background='#00ff00';document.title='clicked';
this.textContent='Done'">Press me</button>
<textarea id="t" oninput="document.title='typed:'+this.value"></textarea>
</body></html>
"""


def png_rows(data):
    """(width, height, rows of pixel bytes, bytes per pixel) of an 8-bit RGB or RGBA PNG; every
    filter type handled."""
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature")
    pos, idat, w, h, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        check(zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0],
              "PNG chunk CRC")
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            check(depth == 8 and ctype in (2, 6), "8-bit RGB or RGBA")
            bpp = 4 if ctype == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def png_decode(data):
    """(width, height, rows of RGB bytes) of an 8-bit RGB PNG (sbx's screenshots)."""
    w, h, rows, bpp = png_rows(data)
    check(bpp == 3, "8-bit RGB")
    return w, h, rows


def pixel(img, x, y):
    return tuple(img[2][y][x * 3:x * 3 + 3])


class Desk:
    """One sandbox's desktop through the server's router."""

    def __init__(self, s, sid):
        self.s, self.sid = s, sid
        self.base = "/sandboxes/%s/proxy/44772" % sid

    def req(self, method, path, body=None, raw=None):
        return self.s.request(method, self.base + path, body=body, raw=raw)

    def ok(self, method, path, body=None):
        r = self.req(method, path, body)
        check(r.status == 200, "%s %s: %r" % (method, path, r))
        return r

    def act(self, action):
        r = self.req("POST", "/desktop/action", action)
        check(r.status == 200, "action %s: %r" % (json.dumps(action)[:200], r))
        return r.json()

    def bad(self, action, field):
        r = self.req("POST", "/desktop/action", action)
        check(r.status == 400 and field in r.json()["message"],
              "%s -> 400 naming `%s`: %r" % (json.dumps(action)[:120], field, r))

    def shot(self, query=""):
        r = self.ok("GET", "/desktop/screenshot" + query)
        return r

    def sh(self, command):
        return self.s.run(self.sid, command)[0]

    def bg(self, command):
        r = self.req("POST", "/command", {"command": command, "background": True})
        check(r.status == 200, "background %s: %r" % (command, r))

    def windows(self):
        return self.ok("GET", "/desktop/windows").json()["windows"]

    def window(self, title, timeout=20):
        return wait_for(lambda: next((w for w in self.windows() if title in w["title"]), None),
                        "a window titled %r" % title, timeout)

    def tree(self):
        return self.ok("GET", "/desktop/accessibility?format=json").json()


def find_node(node, pred):
    if pred(node):
        return node
    for c in node.get("children", []):
        f = find_node(c, pred)
        if f:
            return f
    return None


# ---- the checks ----

def check_status_and_shots(d):
    st = d.ok("GET", "/desktop").json()
    check(st["state"] == "running" and st["width"] == 1280 and st["height"] == 800,
          "running at 1280x800 when the create answered: %r" % st)
    check(st["accessibility"] is True and st["display"] == ":0", "a11y bus, display: %r" % st)
    check(d.ok("GET", "/desktop/screen").json() == {"width": 1280, "height": 800}, "screen size")
    r = d.shot()
    check(r.header("Content-Type") == "image/png", "PNG content type")
    img = png_decode(r.body)
    check(img[:2] == (1280, 800), "PNG size %r" % (img[:2],))
    # the cursor is drawn in unless cursor=false: move it over a flat area and compare
    d.act({"action_type": "MOVE_TO", "parameters": {"x": 1200, "y": 700}})
    with_c = png_decode(d.shot("?x=1190&y=690&width=40&height=40").body)
    without = png_decode(d.shot("?x=1190&y=690&width=40&height=40&cursor=false").body)
    check(with_c[:2] == (40, 40), "region size")
    check(with_c[2] != without[2] and len(set(without[2])) == 1,
          "the cursor is in the shot, and only when asked")
    half = png_decode(d.shot("?scale=0.5").body)
    check(half[:2] == (640, 400), "scale 0.5: %r" % (half[:2],))
    r = d.shot("?format=jpeg&quality=50")
    check(r.header("Content-Type") == "image/jpeg" and r.body[:2] == b"\xff\xd8" and
          r.body[-2:] == b"\xff\xd9", "a JPEG")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "sbx-desk-%d.jpg" % os.getpid())
    with open(path, "wb") as f:
        f.write(r.body)
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height",
                            "-of", "csv=p=0", path], capture_output=True, text=True)
    os.unlink(path)
    check(probe.stdout.strip() == "1280,800", "the JPEG decodes at 1280x800: %r" % probe)
    timing = r.header("X-Sbx-Timing-Ms") or ""
    check(re.match(r"grab=[\d.]+;cursor=[\d.]+;scale=[\d.]+;encode=[\d.]+$", timing),
          "timing header: %r" % timing)
    print("ok   status, screen, PNG/JPEG, region, scale, cursor", flush=True)


def check_chromium_click(d):
    d.sh("cat > /tmp/page.html <<'EOF'\n%sEOF" % PAGE)
    d.bg("chromium --no-sandbox --disable-gpu --no-first-run --disable-background-networking "
         "--disable-component-update --force-renderer-accessibility "
         "--user-data-dir=/tmp/chromium --window-position=0,0 --window-size=1280,800 "
         "--app=file:///tmp/page.html")
    d.window("before", 60)

    def button():
        t = d.tree()
        return find_node(t, lambda n: n.get("role") == "push-button" and
                         n.get("name") == "Press me" and n.get("width", 0) > 0)
    b = wait_for(button, "the button in the accessibility tree", 60)
    x, y, w, h = b["x"], b["y"], b["width"], b["height"]
    before = png_decode(d.shot().body)
    check(pixel(before, 100, 600) == (255, 255, 255), "white page: %r" % (pixel(before, 100, 600),))
    d.act({"action_type": "CLICK", "parameters": {"x": x + w / 2, "y": y + h / 2}})
    d.window("clicked", 20)
    wait_for(lambda: find_node(d.tree(), lambda n: n.get("role") == "push-button" and
                               n.get("name") == "Done"), "the button's new name in the tree", 20)
    after = wait_for(lambda: (lambda i: i if pixel(i, 100, 600) == (0, 255, 0) else None)(
        png_decode(d.shot().body)), "green pixels", 20)
    check(pixel(after, 100, 600) == (0, 255, 0), "the click changed the page's pixels")
    print("ok   a click at the button's a11y position changes the page (tree + pixels)",
          flush=True)
    return b


def check_clipboard(d):
    # into Chromium's textarea (found in the tree): click it, paste what the API put there
    t = wait_for(lambda: find_node(d.tree(), lambda n: n.get("attributes", {}).get("id") == "t"
                                   and n.get("width", 0) > 0), "the textarea in the tree", 20)
    d.act({"action_type": "CLICK", "parameters": {"x": t["x"] + 20, "y": t["y"] + 20}})
    d.ok("PUT", "/desktop/clipboard", {"text": "from the API é"})
    d.act({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "v"]}})
    d.window("typed:from the API é", 20)
    # and back out: select all, copy, read
    d.act({"action_type": "TYPING", "parameters": {"text": " + typed"}})
    d.act({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "a"]}})
    d.act({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "c"]}})
    got = wait_for(lambda: (lambda t: t if t.endswith("typed") else None)(
        d.ok("GET", "/desktop/clipboard").json()["text"]), "Chromium's copy", 20)
    check(got == "from the API é + typed", "the clipboard from Chromium: %r" % got)
    print("ok   clipboard set (pasted in Chromium) and get (copied from Chromium)", flush=True)


def check_terminal_typing(d):
    d.bg("xterm -geometry 80x10+0+0 -T typing-test -e sh -c 'read line; "
         "printf %s \"$line\" > /tmp/typed'")
    w = d.window("typing-test")
    d.ok("POST", "/desktop/windows/%d/activate" % w["id"])
    wait_for(lambda: next((x for x in d.windows() if x["id"] == w["id"] and x["active"]), None),
             "the terminal active", 10)
    text = "echo <a> & b|c ~ $HOME 'q' \"z\" 100%"
    d.act({"action_type": "TYPING", "parameters": {"text": text + "\n"}})
    got = wait_for(lambda: d.sh("cat /tmp/typed 2>/dev/null"), "the typed line", 20)
    check(got == [text], "the terminal got exactly what was typed: %r" % got)
    print("ok   typing reaches the focused terminal ('<' stays '<')", flush=True)


def start_xev(d, name):
    d.sh("rm -f /tmp/%s.log" % name)
    d.bg("stdbuf -oL xev -name %s -geometry 600x400+100+100 -event keyboard -event button "
         "-event mouse > /tmp/%s.log" % (name, name))
    w = d.window(name)
    d.ok("POST", "/desktop/windows/%d/activate" % w["id"])
    wait_for(lambda: next((x for x in d.windows() if x["id"] == w["id"] and x["active"]), None),
             "xev active", 10)
    return w


def xev_log(d, name):
    return "\n".join(d.sh("cat /tmp/%s.log" % name))


def key_events(log):
    """[(press/release, keysym name)] from xev's output."""
    return [("down" if m.group(1) == "KeyPress" else "up", m.group(2))
            for m in re.finditer(r"(KeyPress|KeyRelease) event.*?\n.*?\n.*?keysym 0x[0-9a-f]+, "
                                 r"([^)]+)\)", log)]


def check_keys(d):
    w = start_xev(d, "keys")
    # every computer_13 key name is accepted
    check(len(KEYBOARD_KEYS) == 193, "OSWorld's list has 193 names")
    for k in KEYBOARD_KEYS:
        if k in ("sleep", "capslock", "numlock", "scrolllock"):
            continue  # harmless, but they change what the later keys mean
        d.act({"action_type": "KEY_DOWN", "parameters": {"key": k}})
        d.act({"action_type": "KEY_UP", "parameters": {"key": k}})
    print("ok   all %d computer_13 key names accepted" % len(KEYBOARD_KEYS), flush=True)
    d.ok("POST", "/desktop/windows/%d/close" % w["id"])
    wait_for(lambda: not any(x["id"] == w["id"] for x in d.windows()), "xev closed", 10)

    w = start_xev(d, "sample")
    sample = {"a": "a", "z": "z", "1": "1", "!": "exclam", "<": "less", ">": "greater",
              "enter": "Return", "tab": "Tab", "backspace": "BackSpace", "esc": "Escape",
              "f5": "F5", "pgdn": "Next", "home": "Home", "left": "Left", "win": "Super_L",
              "num5": "KP_5", "volumeup": "XF86AudioRaiseVolume", "browserback": "XF86Back",
              "ctrlright": "Control_R", "del": "Delete", "yen": "yen"}
    for k in sample:
        d.act({"action_type": "PRESS", "parameters": {"key": k}})
    d.act({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "shift", "t"]}})
    d.act({"action": "key", "text": "alt+b ctrl+a"})  # (alt+Tab is the window manager's)
    time.sleep(0.5)
    ev = key_events(xev_log(d, "sample"))
    presses = [n for k, n in ev if k == "down" and n not in ("Shift_L",)]
    want = list(sample.values()) + ["Control_L", "T", "Alt_L", "b", "Control_L", "a"]
    check(presses == want, "keysyms in order:\n got  %r\n want %r" % (presses, want))
    tail = ev[-14:-8]  # the hotkey, before alt+b and ctrl+a
    check(tail[:6] == [("down", "Control_L"), ("down", "Shift_L"), ("down", "T"), ("up", "T"),
                       ("up", "Shift_L"), ("up", "Control_L")],
          "a hotkey presses in order, releases in reverse: %r" % tail)
    print("ok   a sample of key names arrives as the right keysyms; hotkeys in order", flush=True)

    # pointer: drag and scroll, inside xev's window
    x0, y0 = w["x"] + 50, w["y"] + 300
    d.act({"action_type": "MOVE_TO", "parameters": {"x": x0, "y": y0}})
    d.act({"action_type": "DRAG_TO", "parameters": {"x": x0 + 200, "y": y0 - 100}})
    d.act({"action_type": "SCROLL", "parameters": {"dx": -2, "dy": 3}})
    d.act({"action": "scroll", "coordinate": [x0 + 10, y0 + 10], "scroll_direction": "down",
           "scroll_amount": 2})
    time.sleep(0.5)
    log = xev_log(d, "sample")
    buttons = [(m.group(1)[6:], int(m.group(4)), int(m.group(2)), int(m.group(3)))
               for m in re.finditer(r"(ButtonPress|ButtonRelease) event.*?\n.*?root:\((-?\d+),"
                                    r"(-?\d+)\),\n.*?button (\d+)", log)]
    check(buttons[0] == ("Press", 1, x0, y0) and buttons[1] == ("Release", 1, x0 + 200, y0 - 100),
          "drag: press at the start, release at the end: %r" % buttons[:2])
    motion_held = re.findall(r"MotionNotify event.*?\n.*?\n\s+state 0x100", log)
    check(len(motion_held) >= 2, "motion with the button held during the drag")
    wheel = [b[1] for b in buttons[2:] if b[0] == "Press"]
    check(wheel == [6, 6, 4, 4, 4, 5, 5], "scroll: left x2, up x3, down x2: %r" % wheel)
    print("ok   drag (held motion) and scroll arrive as X button events", flush=True)
    d.ok("POST", "/desktop/windows/%d/close" % w["id"])


def check_pyautogui(d):
    """pyautogui code inside the sandbox (OSWorld's pyautogui action space) through sbx's
    module: no pyautogui, Xlib or PIL installed, the events reach an X client."""
    w = start_xev(d, "pyag")
    x, y = w["x"] + 40, w["y"] + 50
    code = ("import pyautogui, sys; print(pyautogui.__version__); "
            "pyautogui.click(%d, %d); pyautogui.typewrite('hi<'); pyautogui.press('enter'); "
            "pyautogui.hotkey('ctrl', 'shift', 'k'); pyautogui.scroll(-2); "
            "pyautogui.moveTo(%d, %d); print(tuple(pyautogui.position())); "
            "print(tuple(pyautogui.size()))" % (x, y, x + 5, y + 6))
    out = d.sh("python3 -c \"%s\" 2>&1" % code)
    check(out[0].endswith("+sbx") and out[1:] == ["(%d, %d)" % (x + 5, y + 6), "(1280, 800)"],
          "sbx's pyautogui ran: %r" % out)
    time.sleep(0.3)
    log = xev_log(d, "pyag")
    keys = [n for k, n in key_events(log) if k == "down"]
    check(keys == ["h", "i", "less", "Return", "Control_L", "Shift_L", "K"],
          "pyautogui's keys arrived: %r" % keys)
    check(re.search(r"ButtonPress event.*?\n.*?root:\(%d,%d\),\n.*?button 1," % (x, y), log),
          "pyautogui's click arrived at (%d, %d)" % (x, y))
    check(len(re.findall(r"ButtonPress event.*?\n.*?\n.*?button 5,", log)) == 2,
          "scroll(-2): two wheel-down clicks")
    err = d.sh("python3 -c \"import pyautogui; pyautogui.press('nosuchkey')\" 2>&1; echo rc=$?")
    check(err[-1] == "rc=1" and any("`key`" in line for line in err),
          "a bad key raises with the API's message: %r" % err[-3:])
    d.ok("POST", "/desktop/windows/%d/close" % w["id"])
    print("ok   pyautogui code inside the sandbox (sbx's module) drives the desktop", flush=True)


def check_computer_use(d):
    d.act({"action": "mouse_move", "coordinate": [640, 400]})
    check(d.act({"action": "cursor_position"})["cursor"] == {"x": 640, "y": 400},
          "cursor_position after mouse_move")
    shot = d.act({"action": "screenshot"})["image"]
    check(shot["mediaType"] == "image/png" and
          png_decode(base64.b64decode(shot["data"]))[:2] == (1280, 800), "screenshot action")
    z = d.act({"action": "zoom", "region": [0, 0, 320, 200]})["image"]
    check(png_decode(base64.b64decode(z["data"]))[:2] == (320, 200), "zoom: the region")
    t0 = time.time()
    r = d.act([{"action": "wait", "duration": 0.3}, {"action": "cursor_position"}])
    check(time.time() - t0 >= 0.3 and len(r["results"]) == 2, "wait, then the next: %r" % r)
    t0 = time.time()
    d.act({"action": "hold_key", "text": "shift", "duration": 0.2})
    check(time.time() - t0 >= 0.2, "hold_key holds")
    check(d.act({"action_type": "DONE"}) == {"done": True, "fail": False}, "DONE")
    check(d.act({"action_type": "FAIL"}) == {"done": True, "fail": True}, "FAIL")
    print("ok   computer-use actions (move, cursor, screenshot, zoom, wait, hold_key), DONE/FAIL",
          flush=True)


def check_recording(d):
    """A recording of a few seconds of activity decodes (ffprobe) with the screen's size and a
    duration within 20 % of the time it ran."""
    check(d.ok("GET", "/desktop/recording").json() == {"recording": False}, "not recording")
    d.ok("POST", "/desktop/recording/start", {"fps": 10})
    r = d.req("POST", "/desktop/recording/start", {})
    check(r.status == 409, "one recording at a time: %r" % r)
    check(d.ok("GET", "/desktop/recording").json() == {"recording": True}, "recording")
    t0 = time.time()
    for i in range(20):
        d.act({"action_type": "MOVE_TO", "parameters": {"x": 100 + i * 40, "y": 300}})
        time.sleep(0.1)
    time.sleep(max(0.0, 3.0 - (time.time() - t0)))
    r = d.req("POST", "/desktop/recording/stop")
    elapsed = time.time() - t0
    check(r.status == 200 and r.header("Content-Type") == "video/mp4", "stop: %r" % r)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "sbx-rec-%d.mp4" % os.getpid())
    with open(path, "wb") as f:
        f.write(r.body)
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                            "stream=width,height,codec_name:format=duration", "-of", "json",
                            path], capture_output=True, text=True)
    os.unlink(path)
    info = json.loads(probe.stdout or "{}")
    st = (info.get("streams") or [{}])[0]
    dur = float(info.get("format", {}).get("duration", 0))
    check((st.get("width"), st.get("height"), st.get("codec_name")) == (1280, 800, "h264"),
          "an H.264 1280x800 recording: %r" % info)
    check(abs(dur - elapsed) <= 0.2 * elapsed, "duration %.2f s for %.2f s of recording"
          % (dur, elapsed))
    r = d.req("POST", "/desktop/recording/stop")
    check(r.status == 409, "stop without a recording: %r" % r)
    r = d.req("POST", "/desktop/recording/start", {"fps": 1000})
    check(r.status == 400, "fps out of range: %r" % r)
    print("ok   a %.1f s recording decodes: 1280x800 H.264, %.2f s" % (elapsed, dur), flush=True)


def check_hostile(d):
    d.bad({"action_type": "CLICK", "parameters": {"x": 1e12, "y": 5}}, "`x`")
    d.bad({"action_type": "MOVE_TO", "parameters": {"x": 5, "y": -1}}, "`y`")
    d.bad({"action_type": "MOVE_TO", "parameters": {"x": 5}}, "`y`")
    d.bad({"action_type": "CLICK", "parameters": {"button": "fourth"}}, "`button`")
    d.bad({"action_type": "CLICK", "parameters": {"num_clicks": 1000}}, "`num_clicks`")
    d.bad({"action_type": "PRESS", "parameters": {"key": "notakey"}}, "`key`")
    d.bad({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl"] * 100}}, "`keys`")
    d.bad({"action_type": "TYPING", "parameters": {"text": "x" * (1 << 20)}}, "`text`")
    d.bad({"action_type": "SCROLL", "parameters": {"dy": 10 ** 9}}, "`dy`")
    d.bad({"action_type": "TELEPORT"}, "action_type")
    d.bad({"action_type": "CLICK", "parameters": {"xx": 1}}, "`xx`")
    d.bad({"action": "left_click", "coordinate": [1, 2, 3]}, "`coordinate`")
    d.bad({"action": "key", "text": "ctrl+nosuchkey"}, "`text`")
    d.bad({"action": "scroll", "scroll_direction": "sideways", "scroll_amount": 1},
          "`scroll_direction`")
    d.bad({"action": "wait", "duration": 1e9}, "`duration`")
    d.bad({"action": "zoom", "region": [0, 0, 99999, 10]}, "`region`")
    d.bad({"nothing": 1}, "action")
    for raw, what in ((b"{not json", "malformed JSON"), (b"[]", "list"), (b"42", "an action")):
        r = d.req("POST", "/desktop/action", raw=raw)
        check(r.status == 400 and r.json()["code"], "%r -> 400: %r" % (raw, r))
    for q in ("?x=5000", "?quality=0&format=jpeg", "?scale=2", "?format=gif", "?cursor=maybe",
              "?width=-1", "?x=1200&width=200"):
        r = d.req("GET", "/desktop/screenshot" + q)
        check(r.status == 400 and r.json()["message"], "screenshot%s -> 400: %r" % (q, r))
    r = d.req("POST", "/desktop/windows/abc/activate")
    check(r.status == 400, "window id not a number: %r" % r)
    r = d.req("POST", "/desktop/windows/12345/close")
    check(r.status == 404, "a window that is not there: %r" % r)
    r = d.req("PUT", "/desktop/clipboard", {"text": 5})
    check(r.status == 400, "clipboard text must be a string: %r" % r)
    r = d.req("POST", "/desktop/start", {"width": 10})
    check(r.status in (400, 409), "bad start options: %r" % r)
    check(png_decode(d.shot().body)[:2] == (1280, 800), "still usable after all that")
    print("ok   hostile input: 4xx naming the field, desktop still usable", flush=True)


def check_supervision(d):
    d.sh("kill -9 $(pidof Xvnc)")
    st = wait_for(lambda: (lambda s: s if s["restarts"] >= 1 and s["state"] == "running" else None)(
        d.ok("GET", "/desktop").json()), "the X server restarted", 20)
    check("Xvnc exited (signal 9)" in st["lastError"], "the crash is reported: %r" % st)
    check(png_decode(d.shot().body)[:2] == (1280, 800), "screenshots after the restart")
    d.act({"action_type": "CLICK", "parameters": {"x": 10, "y": 10}})
    # commands see the new desktop's environment
    check(d.sh("echo $DISPLAY; xprop -root AT_SPI_BUS | grep -c unix:")[0:2] == [":0", "1"],
          "DISPLAY and the a11y bus for commands after the restart")
    # stop/start through the API
    check(d.ok("POST", "/desktop/stop").json()["state"] == "stopped", "stop")
    check(d.sh("pidof Xvnc openbox dbus-daemon || echo none") == ["none"],
          "stop leaves no desktop process")
    r = d.req("GET", "/desktop/screenshot")
    check(r.status == 409 and r.json()["code"] == "DESKTOP_NOT_RUNNING", "409 when stopped: %r" % r)
    st = d.ok("POST", "/desktop/start", {"width": 800, "height": 600,
                                          "windowManager": False}).json()
    check(st["state"] == "running" and st["width"] == 800 and not st["windowManager"],
          "start with options: %r" % st)
    check(png_decode(d.shot().body)[:2] == (800, 600), "the new size")
    r = d.req("POST", "/desktop/start", {})
    check(r.status == 409, "start twice: %r" % r)
    d.bg("xterm -T nowm -geometry 40x5+0+0")
    w = d.window("nowm")
    d.ok("POST", "/desktop/windows/%d/activate" % w["id"])
    print("ok   a killed X server is restarted and reported; stop/start with options; no WM",
          flush=True)


def check_cli(s):
    """sbx create --desktop and the `sbx desktop` verbs against the same server."""
    keyfile = os.path.join(s.tmp, "key")
    with open(keyfile, "w") as f:
        f.write(s.key)
    base = [s.sbx]
    conn = ["-H", "http://127.0.0.1:%d" % s.port, "--api-key-file", keyfile]

    def sbx(*args, ok=True, stdin=None):
        r = subprocess.run(base + [args[0]] + list(args[1:]) + conn if args[0] != "desktop" else
                           base + list(args[:2]) + conn + list(args[2:]), capture_output=True,
                           timeout=120, input=stdin)
        if ok:
            check(r.returncode == 0, "sbx %s: %r" % (" ".join(args)[:80], r))
        return r
    sid = sbx("create", "-q", "--desktop=800x600,wm=none").stdout.decode().strip()
    st = json.loads(sbx("desktop", "status", sid).stdout)
    check(st["state"] == "running" and st["width"] == 800 and not st["windowManager"],
          "sbx desktop status: %r" % st)
    png = os.path.join(s.tmp, "cli.png")
    sbx("desktop", "shot", "-o", png, "--region", "0,0,100,50", sid)
    with open(png, "rb") as f:
        check(png_decode(f.read())[:2] == (100, 50), "sbx desktop shot --region")
    jpg = sbx("desktop", "shot", "--jpeg", "--quality", "30", sid).stdout
    check(jpg[:2] == b"\xff\xd8", "sbx desktop shot --jpeg to a pipe")
    r = sbx("desktop", "do", sid, '{"action_type":"MOVE_TO","parameters":{"x":10,"y":20}}')
    check(json.loads(r.stdout) == {"done": False, "fail": False}, "sbx desktop do: %r" % r)
    r = sbx("desktop", "do", sid, "-", stdin=b'{"action":"cursor_position"}')
    check(json.loads(r.stdout)["cursor"] == {"x": 10, "y": 20}, "sbx desktop do - (stdin)")
    r = sbx("desktop", "do", sid, '{"action_type":"PRESS","parameters":{"key":"nokey"}}',
            ok=False)
    check(r.returncode == 1 and b"`key`" in r.stderr and b"HTTP 400" in r.stderr,
          "a bad action's error on stderr: %r" % r)
    tree = sbx("desktop", "tree", sid).stdout
    check(tree.startswith(b"<?xml") or b"desktop-frame" in tree[:200], "sbx desktop tree: %r"
          % tree[:100])
    check(json.loads(sbx("desktop", "windows", sid).stdout) == {"windows": []}, "no windows")
    sbx("desktop", "record", "--fps", "5", sid)
    time.sleep(1)
    mp4 = os.path.join(s.tmp, "cli.mp4")
    sbx("desktop", "record-stop", "-o", mp4, sid)
    with open(mp4, "rb") as f:
        check(f.read(12)[4:8] == b"ftyp", "sbx desktop record-stop writes an MP4")
    sbx("desktop", "stop", sid)
    r = sbx("desktop", "shot", "-o", png, sid, ok=False)
    check(r.returncode == 1 and b"DESKTOP_NOT_RUNNING" in r.stderr, "shot when stopped: %r" % r)
    sbx("desktop", "start", "--size", "640x480", sid)
    check(json.loads(sbx("desktop", "status", sid).stdout)["height"] == 480, "started again")
    r = sbx("desktop", "frobnicate", sid, ok=False)
    check(r.returncode == 2, "unknown subcommand: usage error")
    r = sbx("create", "--desktop=1x1", ok=False)
    check(r.returncode != 0 and b"sbx.desktop" in r.stderr, "bad --desktop: %r" % r)
    sbx("rm", sid)
    print("ok   sbx create --desktop and sbx desktop status|shot|do|tree|windows|stop|start",
          flush=True)


def host_xvnc():
    return set(subprocess.run(["pgrep", "-x", "Xvnc"], capture_output=True,
                              text=True).stdout.split())


def test(new_server):
    for p in NEEDED:
        if not any(os.access(os.path.join(d, p), os.X_OK)
                   for d in os.environ.get("PATH", "/usr/bin").split(":")):
            raise Skip("%s not installed (scripts/deps.sh)" % p)
    if os.geteuid() != 0:
        raise Skip("native sandboxes need root")
    s = new_server(config_text=CONFIG, tag="desk")
    s.start()
    xvnc_before = host_xvnc()
    r = s.create(extensions={"sbx.desktop": "1280x800"}, resourceLimits={"cpu": "2",
                                                                        "memory": "4Gi"})
    check(r.status == 202 or r.status == 200, "create with a desktop: %r" % r)
    sid = r.json()["id"]
    d = Desk(s, sid)
    check_status_and_shots(d)
    check_chromium_click(d)
    check_clipboard(d)
    check_terminal_typing(d)
    check_keys(d)
    check_pyautogui(d)
    check_computer_use(d)
    check_recording(d)
    check_hostile(d)
    check_supervision(d)

    # pause/resume: frozen with the sandbox, the same desktop after
    before = d.ok("GET", "/desktop").json()
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/%s" % sid).json()["status"]["state"] ==
             "Paused", "Paused", 30)
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/%s" % sid).json()["status"]["state"] ==
             "Running", "Running after resume", 30)
    after = d.ok("GET", "/desktop").json()
    check(after["state"] == "running" and after["restarts"] == before["restarts"],
          "the same desktop after pause/resume: %r" % after)
    check(png_decode(d.shot().body)[:2] == (before["width"], before["height"]),
          "screenshot after resume")
    print("ok   pause/resume keeps the desktop", flush=True)

    # a sandbox stop/start brings the desktop back (execd starts it again)
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "sandbox stop")
    check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "sandbox start")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/%s" % sid).json()["status"]["state"] ==
             "Running", "Running again", 30)
    st = d.ok("GET", "/desktop").json()
    check(st["state"] == "running" and st["width"] == 1280, "the desktop after start: %r" % st)
    check(png_decode(d.shot().body)[:2] == (1280, 800), "screenshot after sandbox start")
    print("ok   sandbox stop/start brings the desktop back", flush=True)

    check_cli(s)
    r = s.create(extensions={"sbx.desktop": "99999x1"})
    check(r.status == 400 and "sbx.desktop" in r.json()["message"], "bad spec at create: %r" % r)

    check(s.request("DELETE", "/v1/sandboxes/%s" % sid).status == 204, "delete")
    s.wait_native_gone(sid)
    wait_for(lambda: host_xvnc() <= xvnc_before, "no Xvnc of the sandbox left", 15)
    print("ok   nothing of the desktop is left after delete", flush=True)


if __name__ == "__main__":
    main(test)
