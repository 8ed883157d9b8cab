"""A sandbox's desktop: status, start/stop, screenshots, actions (OSWorld's computer_13 and
Anthropic's computer use), the accessibility tree, windows, the clipboard. Everything goes to
execd's ``/desktop`` endpoints through the server's router (docs/desktop.md)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    from .sandbox import Sandbox

Action = Mapping[str, Any]


@dataclass
class DesktopStatus:
    state: str  # "stopped", "running" or "failed"
    width: int
    height: int
    window_manager: bool
    restarts: int
    ready_ms: float
    last_error: str
    display: Optional[str] = None
    accessibility: bool = False

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "DesktopStatus":
        return cls(state=j["state"], width=int(j.get("width", 0)),
                   height=int(j.get("height", 0)), window_manager=bool(j.get("windowManager")),
                   restarts=int(j.get("restarts", 0)), ready_ms=float(j.get("readyMs", 0)),
                   last_error=j.get("lastError", ""), display=j.get("display"),
                   accessibility=bool(j.get("accessibility", False)))


@dataclass
class Window:
    id: int
    title: str
    cls: str
    instance: str
    x: int
    y: int
    width: int
    height: int
    active: bool

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Window":
        return cls(id=int(j["id"]), title=j.get("title", ""), cls=j.get("class", ""),
                   instance=j.get("instance", ""), x=int(j.get("x", 0)), y=int(j.get("y", 0)),
                   width=int(j.get("width", 0)), height=int(j.get("height", 0)),
                   active=bool(j.get("active", False)))


@dataclass
class ActionResult:
    """What an action answered: ``done``/``fail`` (computer_13 DONE/FAIL), ``cursor``
    (cursor_position), ``image`` (PNG bytes of a screenshot or zoom action)."""

    done: bool = False
    fail: bool = False
    cursor: Optional[Tuple[int, int]] = None
    image: Optional[bytes] = None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "ActionResult":
        cur = j.get("cursor")
        img = j.get("image")
        return cls(done=bool(j.get("done")), fail=bool(j.get("fail")),
                   cursor=(int(cur["x"]), int(cur["y"])) if cur else None,
                   image=base64.b64decode(img["data"]) if img else None)


class Desktop:
    """``sandbox.desktop``."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    # ---- lifecycle
    def status(self) -> DesktopStatus:
        return DesktopStatus.from_json(self._sb._execd_json("GET", "/desktop"))

    def start(self, width: Optional[int] = None, height: Optional[int] = None,
              window_manager: bool = True) -> DesktopStatus:
        body: Dict[str, Any] = {"windowManager": window_manager}
        if width or height:
            body["width"], body["height"] = int(width or 0), int(height or 0)
        return DesktopStatus.from_json(self._sb._execd_json("POST", "/desktop/start",
                                                            json_body=body))

    def stop(self) -> DesktopStatus:
        return DesktopStatus.from_json(self._sb._execd_json("POST", "/desktop/stop"))

    # ---- screen
    def screenshot(self, format: str = "png", quality: Optional[int] = None,
                   region: Optional[Tuple[int, int, int, int]] = None,
                   scale: Optional[float] = None, cursor: bool = True) -> bytes:
        """PNG (or ``format="jpeg"``) bytes; ``region`` is (x, y, width, height)."""
        q: Dict[str, str] = {"format": format}
        if quality is not None:
            q["quality"] = str(quality)
        if region is not None:
            for k, v in zip(("x", "y", "width", "height"), region):
                q[k] = str(int(v))
        if scale is not None:
            q["scale"] = repr(float(scale))
        if not cursor:
            q["cursor"] = "false"
        return self._sb._execd("GET", "/desktop/screenshot", query=q).read()

    def screen_size(self) -> Tuple[int, int]:
        j = self._sb._execd_json("GET", "/desktop/screen")
        return int(j["width"]), int(j["height"])

    def cursor(self) -> Tuple[int, int]:
        j = self._sb._execd_json("GET", "/desktop/cursor")
        return int(j["x"]), int(j["y"])

    # ---- actions
    def act(self, action: Action) -> ActionResult:
        """One action: ``{"action_type": "CLICK", "parameters": {"x": 10, "y": 20}}`` or
        ``{"action": "left_click", "coordinate": [10, 20]}``. A bad action raises
        :class:`sbx.SbxError` (400) naming the field, and does nothing."""
        return ActionResult.from_json(self._sb._execd_json("POST", "/desktop/action",
                                                           json_body=dict(action)))

    def act_all(self, actions: Sequence[Action]) -> List[ActionResult]:
        """Several actions in one request, applied in order (waits included)."""
        j = self._sb._execd_json("POST", "/desktop/action",
                                 json_body={"actions": [dict(a) for a in actions]})
        return [ActionResult.from_json(r) for r in j["results"]]

    def click(self, x: float, y: float, button: str = "left", clicks: int = 1) -> None:
        self.act({"action_type": "CLICK", "parameters": {"x": x, "y": y, "button": button,
                                                         "num_clicks": clicks}})

    def move(self, x: float, y: float) -> None:
        self.act({"action_type": "MOVE_TO", "parameters": {"x": x, "y": y}})

    def type(self, text: str) -> None:
        self.act({"action_type": "TYPING", "parameters": {"text": text}})

    def press(self, key: str) -> None:
        self.act({"action_type": "PRESS", "parameters": {"key": key}})

    def hotkey(self, *keys: str) -> None:
        self.act({"action_type": "HOTKEY", "parameters": {"keys": list(keys)}})

    def scroll(self, dy: int = 0, dx: int = 0) -> None:
        self.act({"action_type": "SCROLL", "parameters": {"dx": dx, "dy": dy}})

    # ---- recording
    def record_start(self, fps: int = 15) -> None:
        """Start a screen recording (ffmpeg x11grab, H.264); one at a time."""
        self._sb._execd("POST", "/desktop/recording/start", json_body={"fps": int(fps)}).read()

    def record_stop(self) -> bytes:
        """Stop the recording and return the MP4's bytes."""
        return self._sb._execd("POST", "/desktop/recording/stop", timeout=60).read()

    # ---- tree, windows, clipboard
    def accessibility_tree(self, format: str = "xml", actions: bool = True) -> Union[str, Any]:
        """OSWorld's XML (a string) or, with ``format="json"``, the parsed JSON tree."""
        q = {"format": format, "actions": "true" if actions else "false"}
        r = self._sb._execd("GET", "/desktop/accessibility", query=q)
        return r.json() if format == "json" else r.read().decode("utf-8", "replace")

    def windows(self) -> List[Window]:
        return [Window.from_json(w)
                for w in self._sb._execd_json("GET", "/desktop/windows")["windows"]]

    def activate(self, window: Union[int, Window]) -> None:
        wid = window.id if isinstance(window, Window) else int(window)
        self._sb._execd("POST", "/desktop/windows/%d/activate" % wid).read()

    def close_window(self, window: Union[int, Window]) -> None:
        wid = window.id if isinstance(window, Window) else int(window)
        self._sb._execd("POST", "/desktop/windows/%d/close" % wid).read()

    def clipboard(self) -> str:
        return str(self._sb._execd_json("GET", "/desktop/clipboard")["text"])

    def set_clipboard(self, text: str) -> None:
        self._sb._execd("PUT", "/desktop/clipboard", json_body={"text": text}).read()

    def view_url(self, ttl: Optional[int] = None) -> str:
        """A link to watch and drive this desktop in a browser (noVNC, served by ``sbx serve``):
        ``http://SERVER/desktop/view/ID#token=T``. Whoever holds it can, until the token expires
        (``ttl`` seconds, 10-86400; the server's default is an hour)."""
        body: Dict[str, Any] = {} if ttl is None else {"ttlSeconds": int(ttl)}
        j = self._sb._t.call("POST", self._sb._path("/desktop/view"), json_body=body)
        return str(j["url"])
