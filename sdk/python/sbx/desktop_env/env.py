"""DesktopEnv: OSWorld's constructor arguments, methods and observation dict on sbx."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..client import Client
from ..errors import SbxError
from ..sandbox import Sandbox
from . import evaluate as _evaluate
from . import setup as _setup
from .errors import EvaluationError, SetupError

ACTION_SPACES = ("computer_13", "pyautogui", "claude_computer_use")
# OSWorld's related_apps whose programs Debian does not package: a task naming one is reported
# as needing it when the image lacks the program (a clear error, not a failed launch later).
NEEDS_PROGRAM = {"chrome": ("Google Chrome", "google-chrome"),
                 "vs_code": ("Visual Studio Code", "code")}
SPECIAL = ("WAIT", "FAIL", "DONE")
PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

__all__ = ["DesktopEnv", "SetupError", "EvaluationError"]


class DesktopEnv:
    """OSWorld's ``DesktopEnv`` where its arguments make sense on sbx.

    ``provider_name``: an sbx provider ("native", "docker"; None: the server's default).
    ``snapshot_name``: the image of the sandboxes ("host": the server's built-in one).
    ``screen_size``: the desktop's size. ``client``: an :class:`sbx.Client` (default: from
    SBX_HOST / SBX_API_KEY like the CLI). ``cache_dir``: OSWorld's cache layout
    (``<cache_dir>/<task id>/...``) for downloads and pulled files.
    """

    def __init__(self, provider_name: Optional[str] = None, region: Optional[str] = None,
                 path_to_vm: Optional[str] = None, snapshot_name: str = "host",
                 action_space: str = "pyautogui", cache_dir: str = "cache",
                 screen_size: Tuple[int, int] = (int(os.environ.get("SCREEN_WIDTH", 1920)),
                                                 int(os.environ.get("SCREEN_HEIGHT", 1080))),
                 headless: bool = True, require_a11y_tree: bool = True,
                 require_terminal: bool = False, os_type: str = "Ubuntu",
                 enable_proxy: bool = False, client_password: str = "password",
                 client: Optional[Client] = None, memory: str = "2Gi", cpu: str = "2",
                 sandbox_timeout: int = 3600) -> None:
        if action_space not in ACTION_SPACES:
            raise ValueError("action_space must be one of %s, not %r" % (ACTION_SPACES,
                                                                           action_space))
        if os_type != "Ubuntu":
            raise ValueError("sbx desktops are Linux: os_type must be 'Ubuntu'")
        self.provider_name = provider_name
        self.snapshot_name = snapshot_name
        self.action_space = action_space
        self.cache_dir_base = cache_dir
        self.screen_size = (int(screen_size[0]), int(screen_size[1]))
        self.headless = headless
        self.require_a11y_tree = require_a11y_tree
        self.require_terminal = require_terminal
        self.os_type = os_type
        self.enable_proxy = enable_proxy
        self.client_password = client_password
        self.client = client or Client()
        self._memory, self._cpu, self._ttl = memory, cpu, sandbox_timeout
        self.sandbox: Optional[Sandbox] = None
        self.task_id: Optional[str] = None
        self.instruction: Optional[str] = None
        self.evaluator: Dict[str, Any] = {}
        self.action_history: List[Any] = []
        self._step_no = 0
        self.timings: Dict[str, float] = {}

    # ---- properties OSWorld has
    @property
    def vm_platform(self) -> str:
        return "Linux"

    @property
    def vm_screen_size(self) -> Tuple[int, int]:
        return self.screen_size

    @property
    def cache_dir(self) -> str:
        d = os.path.join(self.cache_dir_base, self.task_id or "default")
        os.makedirs(d, exist_ok=True)
        return d

    # ---- the loop
    def reset(self, task_config: Optional[Mapping[str, Any]] = None, seed: Any = None,
              options: Any = None) -> Dict[str, Any]:
        """A fresh sandbox with a desktop, the task's setup run on it; the first observation."""
        t0 = time.monotonic()
        task = dict(task_config or {})
        self.close()
        self.task_id = task.get("id")
        self.instruction = task.get("instruction")
        self.evaluator = dict(task.get("evaluator") or {})
        self.action_history = []
        self._step_no = 0
        if task.get("proxy") and self.enable_proxy:
            raise SetupError("proxy", "sbx does not set up OSWorld's task proxy (the task "
                             "needs one: `proxy` is true)")
        w, h = self.screen_size
        self.sandbox = self.client.create(
            self.snapshot_name, desktop="%dx%d" % (w, h), provider=self.provider_name,
            memory=self._memory, cpu=self._cpu, timeout=self._ttl,
            metadata={"sbx-desktop-env": str(self.task_id or "none")[:60]})
        self._wait_api()
        self.timings["create"] = time.monotonic() - t0
        self._check_apps(task.get("related_apps") or [])
        _setup.run_steps(self, task.get("config") or [])
        self.timings["reset"] = time.monotonic() - t0
        return self._get_obs()

    def step(self, action: Any, pause: float = 2) -> Tuple[Dict[str, Any], float, bool,
                                                           Dict[str, Any]]:
        """Apply one action; (observation, reward 0, done, info) as OSWorld answers."""
        sb = self._need()
        self._step_no += 1
        self.action_history.append(action)
        done, info = False, {}
        kind = action if isinstance(action, str) else (
            action.get("action_type") if isinstance(action, Mapping) else None)
        if kind in SPECIAL:
            if kind == "WAIT":
                time.sleep(pause)
            elif kind == "FAIL":
                done, info = True, {"fail": True}
            else:
                done, info = True, {"done": True}
        elif self.action_space == "computer_13" or (isinstance(action, Mapping)
                                                    and "action" in action):
            r = sb.desktop.act(action)
            done = r.done
        elif isinstance(action, str):
            self.run_pyautogui(action)
        elif isinstance(action, Mapping) and "command" in action:
            self.run_pyautogui(str(action["command"]))
        else:
            raise ValueError("an action is a computer_13 dict, a pyautogui code string, or "
                             "WAIT/FAIL/DONE; got %r" % (action,))
        if not done and kind != "WAIT":
            time.sleep(pause)
        return self._get_obs(), 0.0, done, info

    def run_pyautogui(self, code: str) -> Dict[str, Any]:
        """What OSWorld's PythonController.execute_python_command does, through /execute."""
        return self.osworld("POST", "/execute", {
            "command": ["python3", "-c", PYAUTOGUI_PREFIX + code], "shell": False})

    def evaluate(self) -> float:
        """OSWorld's scoring: postconfig, then the getters and metrics of the evaluator."""
        return _evaluate.evaluate(self)

    def render(self, mode: str = "rgb_array") -> bytes:
        return self._need().desktop.screenshot()

    def close(self) -> None:
        if self.sandbox is not None:
            try:
                self.sandbox.kill()
            except SbxError:
                pass
        self.sandbox = None

    def __enter__(self) -> "DesktopEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- helpers
    def _check_apps(self, apps: List[Any]) -> None:
        """Each related app the image cannot run, named before any setup step fails on it."""
        for app in apps:
            if app not in NEEDS_PROGRAM:
                continue
            name, prog = NEEDS_PROGRAM[app]
            r = self.osworld("POST", "/execute", {"command": ["sh", "-c", "command -v " + prog],
                                                 "shell": False})
            if not isinstance(r, dict) or r.get("returncode") != 0:
                raise SetupError("related_apps", "the task needs %s (`%s`), which the image "
                                 "%s does not have (Debian does not package it)"
                                 % (name, prog, self.snapshot_name))

    def _need(self) -> Sandbox:
        if self.sandbox is None:
            raise RuntimeError("call reset() first")
        return self.sandbox

    def _wait_api(self, timeout: float = 30) -> None:
        """OSWorld's SetupController polls the in-VM server first: so do we (port 5000)."""
        end = time.monotonic() + timeout
        while True:
            try:
                self._need().proxy("GET", 5000, "/platform").read()
                return
            except SbxError:
                if time.monotonic() > end:
                    raise SetupError("start", "the desktop's OSWorld API did not answer in "
                                     "%.0f s" % timeout)
                time.sleep(0.02)

    def osworld(self, method: str, path: str, body: Any = None,
                raw: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
                timeout: float = 300, ok: Any = (200,)) -> Any:
        """A call to the sandbox's OSWorld API (port 5000): JSON when it answers JSON."""
        kw: Dict[str, Any] = {"timeout": timeout, "ok": ok}
        if raw is not None:
            kw["body"] = raw
            kw["headers"] = dict(headers or {})
        elif body is not None:
            kw["json_body"] = body
        r = self._need().proxy(method, 5000, path, **kw)
        ctype = r.headers.get("content-type", "")
        data = r.read()
        if ctype.startswith("application/json"):
            import json
            return json.loads(data) if data else None
        return data

    def _get_obs(self) -> Dict[str, Any]:
        sb = self._need()
        obs: Dict[str, Any] = {"screenshot": sb.desktop.screenshot(),
                               "accessibility_tree": None, "terminal": None,
                               "instruction": self.instruction}
        if self.require_a11y_tree:
            obs["accessibility_tree"] = sb.desktop.accessibility_tree()
        if self.require_terminal:
            t = self.osworld("GET", "/terminal")
            obs["terminal"] = t.get("output") if isinstance(t, dict) else None
        return obs


Action = Union[str, Mapping[str, Any]]
