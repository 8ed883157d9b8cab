"""pyautogui, as sbx's desktops provide it: the calls agents use (OSWorld's pyautogui action
space), applied by sbx-execd through the sandbox's desktop with the same checks and key names
as its /desktop/action API. Standard library only: works in images without pyautogui, Xlib
or PIL (screenshot() needs PIL only to return an Image; with a file name it writes the PNG).

The desktop is reached over the unix socket named by SBX_DESKTOP_SOCKET (execd sets it for
every command while a desktop runs). Delays: PAUSE after every call (0.1 s, as pyautogui's: code
written for OSWorld counts on it, e.g. a hotkey that moves focus before the next keys; set
`pyautogui.PAUSE = 0` for none) and the `duration`/`interval` arguments, with time.sleep;
nothing else waits.
"""
import collections
import json
import os
import socket
import time

__version__ = "0.9.54+sbx"

PAUSE = 0.1
FAILSAFE = False
MINIMUM_DURATION = 0.1
Point = collections.namedtuple("Point", "x y")
Size = collections.namedtuple("Size", "width height")

KEY_NAMES = (["\t", "\n", "\r", " "] + list("!\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`"
                                            "abcdefghijklmnopqrstuvwxyz{|}~") +
             """accept add alt altleft altright apps backspace browserback browserfavorites
             browserforward browserhome browserrefresh browsersearch browserstop capslock clear
             convert ctrl ctrlleft ctrlright decimal del delete divide down end enter esc escape
             execute f1 f10 f11 f12 f13 f14 f15 f16 f17 f18 f19 f2 f20 f21 f22 f23 f24 f3 f4 f5
             f6 f7 f8 f9 final fn hanguel hangul hanja help home insert junja kana kanji
             launchapp1 launchapp2 launchmail launchmediaselect left modechange multiply
             nexttrack nonconvert num0 num1 num2 num3 num4 num5 num6 num7 num8 num9 numlock
             pagedown pageup pause pgdn pgup playpause prevtrack print printscreen prntscrn
             prtsc prtscr return right scrolllock select separator shift shiftleft shiftright
             sleep space stop subtract tab up volumedown volumemute volumeup win winleft
             winright yen command option optionleft optionright""".split())
KEYBOARD_KEYS = KEY_NAMES


class PyAutoGUIException(Exception):
    pass


class FailSafeException(PyAutoGUIException):
    pass


class ImageNotFoundException(PyAutoGUIException):
    pass


_conn = None


def _call(req):
    """One request to execd's desktop socket; the answer, or PyAutoGUIException."""
    global _conn
    path = os.environ.get("SBX_DESKTOP_SOCKET")
    if not path:
        raise PyAutoGUIException("no sbx desktop here (SBX_DESKTOP_SOCKET is not set)")
    for attempt in (0, 1):
        try:
            if _conn is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                _conn = s.makefile("rwb")
            _conn.write(json.dumps(req).encode() + b"\n")
            _conn.flush()
            line = _conn.readline()
            if not line:
                raise OSError("the desktop closed the connection")
            break
        except OSError as e:
            _conn = None
            if attempt:
                raise PyAutoGUIException("sbx desktop: %s" % e)
    ans = json.loads(line)
    if "code" in ans and "message" in ans:
        raise PyAutoGUIException(ans["message"])
    return ans


def _act(action_type, **params):
    p = {k: v for k, v in params.items() if v is not None}
    ans = _call({"action_type": action_type, "parameters": p})
    if PAUSE:
        time.sleep(PAUSE)
    return ans


def _key(k):
    return k.lower() if isinstance(k, str) and len(k) > 1 else k


def _xy(x, y):
    """pyautogui accepts (x, y), a tuple/list in x, or None for the current position."""
    if isinstance(x, (tuple, list)):
        x, y = x[0], x[1]
    return x, y


# ---- screen
def size():
    a = _call({"sbx": "screen"})
    return Size(a["width"], a["height"])


def resolution():
    return size()


def position(x=None, y=None):
    a = _call({"action": "cursor_position"})["cursor"]
    return Point(a["x"] if x is None else x, a["y"] if y is None else y)


def onScreen(x, y=None):
    x, y = _xy(x, y)
    w, h = size()
    return 0 <= x < w and 0 <= y < h


def screenshot(imageFilename=None, region=None):
    req = {"action": "screenshot"}
    if region:
        x, y, w, h = region
        req = {"action": "zoom", "region": [x, y, x + w, y + h]}
    import base64
    png = base64.b64decode(_call(req)["image"]["data"])
    if imageFilename:
        with open(imageFilename, "wb") as f:
            f.write(png)
    try:
        import io
        from PIL import Image
    except ImportError:
        if imageFilename:
            return None
        raise PyAutoGUIException("screenshot() returns a PIL Image: install PIL, or pass a "
                                 "file name to get the PNG")
    return Image.open(io.BytesIO(png))


def locateOnScreen(*args, **kw):
    raise NotImplementedError("image search is not part of sbx's pyautogui")


locateCenterOnScreen = locateAllOnScreen = locateOnScreen


def sleep(seconds):
    time.sleep(seconds)


# ---- mouse
def moveTo(x=None, y=None, duration=0.0, tween=None, logScreenshot=False, _pause=True):
    x, y = _xy(x, y)
    if x is None or y is None:
        cur = position()
        x = cur.x if x is None else x
        y = cur.y if y is None else y
    if duration and duration > 0:
        time.sleep(duration)
    _act("MOVE_TO", x=x, y=y)


def moveRel(xOffset=None, yOffset=None, duration=0.0, tween=None, logScreenshot=False,
            _pause=True):
    xOffset, yOffset = _xy(xOffset, yOffset)
    cur = position()
    moveTo(cur.x + (xOffset or 0), cur.y + (yOffset or 0), duration)


move = moveRel


def click(x=None, y=None, clicks=1, interval=0.0, button="left", duration=0.0, tween=None,
          logScreenshot=None, _pause=True):
    x, y = _xy(x, y)
    button = {"primary": "left", "secondary": "right", 1: "left", 2: "middle",
              3: "right"}.get(button, button)
    if x is not None or y is not None:
        moveTo(x, y, duration)
    clicks = int(clicks)
    if interval and clicks > 1:
        for _ in range(clicks):
            _act("CLICK", button=button, num_clicks=1)
            time.sleep(interval)
    elif clicks > 0:
        while clicks > 0:
            n = min(clicks, 3)
            _act("CLICK", button=button, num_clicks=n)
            clicks -= n


def leftClick(x=None, y=None, interval=0.0, duration=0.0, tween=None, logScreenshot=None,
              _pause=True):
    click(x, y, 1, interval, "left", duration)


def rightClick(x=None, y=None, duration=0.0, tween=None, logScreenshot=None, _pause=True):
    click(x, y, 1, 0.0, "right", duration)


def middleClick(x=None, y=None, duration=0.0, tween=None, logScreenshot=None, _pause=True):
    click(x, y, 1, 0.0, "middle", duration)


def doubleClick(x=None, y=None, interval=0.0, button="left", duration=0.0, tween=None,
                logScreenshot=None, _pause=True):
    click(x, y, 2, interval, button, duration)


def tripleClick(x=None, y=None, interval=0.0, button="left", duration=0.0, tween=None,
                logScreenshot=None, _pause=True):
    click(x, y, 3, interval, button, duration)


def mouseDown(x=None, y=None, button="left", duration=0.0, tween=None, logScreenshot=None,
              _pause=True):
    x, y = _xy(x, y)
    if x is not None or y is not None:
        moveTo(x, y, duration)
    _act("MOUSE_DOWN", button=button)


def mouseUp(x=None, y=None, button="left", duration=0.0, tween=None, logScreenshot=None,
            _pause=True):
    x, y = _xy(x, y)
    if x is not None or y is not None:
        moveTo(x, y, duration)
    _act("MOUSE_UP", button=button)


def dragTo(x=None, y=None, duration=0.0, tween=None, button="left", logScreenshot=None,
           _pause=True, mouseDownUp=True):
    x, y = _xy(x, y)
    if duration and duration > 0:
        time.sleep(duration)
    if button == "left" and mouseDownUp:
        _act("DRAG_TO", x=x, y=y)
        return
    if mouseDownUp:
        _act("MOUSE_DOWN", button=button)
    _act("MOVE_TO", x=x, y=y)
    if mouseDownUp:
        _act("MOUSE_UP", button=button)


def dragRel(xOffset=0, yOffset=0, duration=0.0, tween=None, button="left", logScreenshot=None,
            _pause=True, mouseDownUp=True):
    xOffset, yOffset = _xy(xOffset, yOffset)
    cur = position()
    dragTo(cur.x + xOffset, cur.y + yOffset, duration, None, button, None, _pause, mouseDownUp)


drag = dragRel


def scroll(clicks, x=None, y=None, logScreenshot=None, _pause=True):
    x, y = _xy(x, y)
    if x is not None or y is not None:
        moveTo(x, y)
    _act("SCROLL", dy=int(clicks))


vscroll = scroll


def hscroll(clicks, x=None, y=None, logScreenshot=None, _pause=True):
    x, y = _xy(x, y)
    if x is not None or y is not None:
        moveTo(x, y)
    _act("SCROLL", dx=int(clicks))


# ---- keyboard
def isValidKey(key):
    return _key(key) in KEY_NAMES


def keyDown(key, logScreenshot=None, _pause=True):
    _act("KEY_DOWN", key=_key(key))


def keyUp(key, logScreenshot=None, _pause=True):
    _act("KEY_UP", key=_key(key))


def press(keys, presses=1, interval=0.0, logScreenshot=None, _pause=True):
    if isinstance(keys, str):
        keys = [keys]
    for _ in range(int(presses)):
        for k in keys:
            _act("PRESS", key=_key(k))
            if interval:
                time.sleep(interval)


def hotkey(*args, **kwargs):
    keys = [_key(k) for k in (args[0] if len(args) == 1 and isinstance(args[0], (list, tuple))
                              else args)]
    _act("HOTKEY", keys=keys)


def typewrite(message, interval=0.0, logScreenshot=None, _pause=True):
    if isinstance(message, str):
        if interval:
            for ch in message:
                _act("TYPING", text=ch)
                time.sleep(interval)
        elif message:
            _act("TYPING", text=message)
        return
    for k in message:  # a list of key names
        press(k)
        if interval:
            time.sleep(interval)


write = typewrite


# ---- what callers sometimes touch
def failSafeCheck():
    pass


def useImageNotFoundException(value=None):
    pass


def countdown(seconds):
    time.sleep(seconds)
