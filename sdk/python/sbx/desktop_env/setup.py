"""OSWorld's task setup steps (SetupController), run against the sandbox's OSWorld API.

Every step type that works without an outside account: launch, execute/command (with
``until`` and the placeholders), execute_with_verification, open, sleep, upload_file, download
(OSWorld's cache layout, so a cache prepared elsewhere works offline), activate_window,
close_window, change_wallpaper. googledrive and login need an outside account and fail with a
message saying so; the Chrome DevTools steps are not built yet and say that.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from typing import TYPE_CHECKING, Any, Dict, List, Mapping

from ..errors import SbxError
from . import chrome as _chrome
from .errors import SetupError

if TYPE_CHECKING:
    from .env import DesktopEnv

UNTIL_INTERVAL = 0.3
UNTIL_MAX_TRIES = 200  # 60 s at 0.3 s


def placeholders(env: "DesktopEnv", value: Any) -> Any:
    """{CLIENT_PASSWORD}, {SCREEN_WIDTH}, {SCREEN_HEIGHT}, *_HALF in strings and lists."""
    if isinstance(value, list):
        return [placeholders(env, v) for v in value]
    if not isinstance(value, str):
        return value
    w, h = env.screen_size
    for k, v in (("{CLIENT_PASSWORD}", env.client_password), ("{SCREEN_WIDTH}", str(w)),
                 ("{SCREEN_HEIGHT}", str(h)), ("{SCREEN_WIDTH_HALF}", str(w // 2)),
                 ("{SCREEN_HEIGHT_HALF}", str(h // 2))):
        value = value.replace(k, v)
    return value


def _execute(env: "DesktopEnv", p: Mapping[str, Any]) -> Dict[str, Any]:
    command = placeholders(env, p["command"])
    shell = bool(p.get("shell", False))
    until = p.get("until") or {}
    for _ in range(UNTIL_MAX_TRIES if until else 1):
        res = env.osworld("POST", "/setup/execute", {"command": command, "shell": shell},
                          ok=(200, 500))
        if not until or _until_met(until, res):
            break
        time.sleep(UNTIL_INTERVAL)
    else:
        raise SetupError("execute", "`until` %r never held: last %r" % (until, res))
    for key in ("stdout", "stderr"):
        if p.get(key):  # OSWorld keeps the output in the task's cache under that name
            with open(os.path.join(env.cache_dir, p[key]), "w") as f:
                f.write(res.get("output" if key == "stdout" else "error", "") or "")
    return res


def _until_met(until: Mapping[str, Any], res: Mapping[str, Any]) -> bool:
    if "returncode" in until and res.get("returncode") != until["returncode"]:
        return False
    if "stdout" in until and until["stdout"] not in (res.get("output") or ""):
        return False
    if "stderr" in until and until["stderr"] not in (res.get("error") or ""):
        return False
    return True


def _upload(env: "DesktopEnv", local: str, path: str) -> None:
    with open(local, "rb") as f:
        data = f.read()
    boundary = uuid.uuid4().hex
    body = (b"--%s\r\nContent-Disposition: form-data; name=\"file_path\"\r\n\r\n%s\r\n"
            b"--%s\r\nContent-Disposition: form-data; name=\"file_data\"; filename=\"%s\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" % (
                boundary.encode(), path.encode(), boundary.encode(),
                os.path.basename(path).encode()) + data +
            b"\r\n--%s--\r\n" % boundary.encode())
    env.osworld("POST", "/setup/upload", raw=body, headers={
        "Content-Type": "multipart/form-data; boundary=" + boundary})


def cache_path(env: "DesktopEnv", url: str, path: str) -> str:
    """OSWorld's cache file for a download: <cache>/<task>/<uuid5(url)>_<basename>."""
    name = "%s_%s" % (uuid.uuid5(uuid.NAMESPACE_URL, url), os.path.basename(path))
    return os.path.join(env.cache_dir, name)


def download_to_cache(env: "DesktopEnv", url: str, path: str) -> str:
    local = cache_path(env, url, path)
    if os.path.exists(local):
        return local
    last: Exception = RuntimeError("no try")
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=300) as r, open(local + ".part", "wb") as f:
                while True:
                    chunk = r.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
            os.replace(local + ".part", local)
            return local
        except OSError as e:
            last = e
    raise SetupError("download", "%s: %s (not in the cache %s either)" % (url, last, local))


def _window(env: "DesktopEnv", kind: str, p: Mapping[str, Any]) -> None:
    env.osworld("POST", "/setup/%s" % kind, {"window_name": p["window_name"],
                                            "strict": bool(p.get("strict", False)),
                                            "by_class": bool(p.get("by_class", False))})


def run_step(env: "DesktopEnv", step: Mapping[str, Any]) -> None:
    kind = step.get("type")
    p = step.get("parameters") or {}
    if kind in ("execute", "command"):
        _execute(env, p)
    elif kind == "launch":
        env.osworld("POST", "/setup/launch", {"command": placeholders(env, p["command"]),
                                              "shell": bool(p.get("shell", False))})
    elif kind == "execute_with_verification":
        body = dict(p)
        body["command"] = placeholders(env, p["command"])
        env.osworld("POST", "/setup/execute_with_verification", body)
    elif kind == "open":
        env.osworld("POST", "/setup/open_file", {"path": p["path"]}, timeout=1900)
    elif kind == "sleep":
        time.sleep(float(p["seconds"]))
    elif kind == "upload_file":
        for f in p["files"]:
            _upload(env, f["local_path"], f["path"])
    elif kind == "download":
        for f in p["files"]:
            _upload(env, download_to_cache(env, f["url"], f["path"]), f["path"])
    elif kind in ("activate_window", "close_window"):
        _window(env, kind, p)
    elif kind == "change_wallpaper":
        env.osworld("POST", "/setup/change_wallpaper", {"path": p["path"]})
    elif kind in ("googledrive", "login"):
        raise SetupError(kind, "needs an outside account (Google Drive, a web login): not "
                         "available in an sbx sandbox")
    elif kind == "chrome_open_tabs":
        _chrome.open_tabs(env, list(p["urls_to_open"]))
    elif kind == "chrome_close_tabs":
        _chrome.close_tabs(env, list(p["urls_to_close"]))
    elif kind == "update_browse_history":
        raise SetupError(kind, "not supported yet (it writes Chrome's History database)")
    elif kind in ("proxy", "tidy_desktop", "act", "replay"):
        raise SetupError(kind, "not supported (OSWorld's own is a stub or needs a proxy)")
    else:
        raise SetupError(str(kind), "unknown setup step type")


def run_steps(env: "DesktopEnv", steps: List[Mapping[str, Any]]) -> None:
    for i, step in enumerate(steps):
        try:
            run_step(env, step)
        except SetupError:
            raise
        except (SbxError, OSError, KeyError, ValueError, TypeError, json.JSONDecodeError) as e:
            raise SetupError(str(step.get("type")), "step %d failed: %s" % (i, e)) from e
