"""A sandbox: its lifecycle (info, pause, resume, stop, start, renew, kill) and the ways into
it (commands, files, code, desktop), all through the server's API and router."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional
from urllib.parse import quote

from ._http import Response, Transport
from .code import Code
from .commands import Commands
from .errors import SbxError
from .files import Files

if TYPE_CHECKING:
    from .desktop import Desktop

EXECD_PORT = 44772


@dataclass
class SandboxInfo:
    """What ``GET /sandboxes/{id}`` says (``raw`` is the whole answer)."""

    id: str
    state: str
    reason: str = ""
    message: str = ""
    created_at: str = ""
    expires_at: Optional[str] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    entrypoint: List[str] = field(default_factory=list)
    image: Optional[str] = None
    provider: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "SandboxInfo":
        st = j.get("status") or {}
        return cls(id=j["id"], state=st.get("state", ""), reason=st.get("reason", ""),
                   message=st.get("message", ""), created_at=j.get("createdAt", ""),
                   expires_at=j.get("expiresAt"), metadata=dict(j.get("metadata") or {}),
                   entrypoint=list(j.get("entrypoint") or []),
                   image=(j.get("image") or {}).get("uri"), provider=j.get("provider"),
                   raw=dict(j))


class Sandbox:
    """A handle on one sandbox; cheap to make (:meth:`Client.connect`)."""

    def __init__(self, transport: Transport, sandbox_id: str,
                 info: Optional[SandboxInfo] = None) -> None:
        self._t = transport
        self.id = sandbox_id
        self._info = info
        self.commands = Commands(self)
        self.files = Files(self)
        self.code = Code(self)
        self._desktop: Optional["Desktop"] = None

    def __repr__(self) -> str:
        return "Sandbox(%r)" % self.id

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    @property
    def desktop(self) -> "Desktop":
        """The sandbox's desktop (``sandbox.desktop.screenshot()``...)."""
        if self._desktop is None:
            from .desktop import Desktop
            self._desktop = Desktop(self)
        return self._desktop

    # ---- lifecycle
    def _path(self, suffix: str = "") -> str:
        return "/v1/sandboxes/" + quote(self.id, safe="") + suffix

    def info(self) -> SandboxInfo:
        self._info = SandboxInfo.from_json(self._t.call("GET", self._path()))
        return self._info

    @property
    def state(self) -> str:
        return self.info().state

    def kill(self) -> None:
        """Delete the sandbox and everything in it (a sandbox already gone is fine)."""
        from .errors import NotFoundError
        try:
            self._t.open("DELETE", self._path()).read()
        except NotFoundError:
            pass

    def pause(self) -> None:
        self._t.open("POST", self._path("/pause")).read()

    def resume(self) -> None:
        self._t.open("POST", self._path("/resume")).read()

    def stop(self) -> None:
        """Stop the processes, keep the files (sbx extension); :meth:`start` runs it again."""
        self._t.open("POST", self._path("/stop"), timeout=120).read()

    def start(self) -> None:
        self._t.open("POST", self._path("/start"), timeout=120).read()

    def renew(self, seconds: float) -> str:
        """Expire ``seconds`` from now; returns the new ``expiresAt``."""
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (at.microsecond // 1000)
        j = self._t.call("POST", self._path("/renew-expiration"), json_body={"expiresAt": stamp})
        return j["expiresAt"]

    def set_metadata(self, changes: Mapping[str, Optional[str]]) -> SandboxInfo:
        """Merge ``changes`` into the labels (a None value deletes the key)."""
        self._info = SandboxInfo.from_json(
            self._t.call("PATCH", self._path("/metadata"), json_body=dict(changes)))
        return self._info

    def wait_state(self, *states: str, timeout: float = 60.0) -> SandboxInfo:
        deadline = time.monotonic() + timeout
        while True:
            info = self.info()
            if info.state in states:
                return info
            if time.monotonic() > deadline:
                raise SbxError("TIMEOUT", "sandbox %s is %s, not %s after %.0f s"
                               % (self.id, info.state, "/".join(states), timeout))
            time.sleep(0.1)

    def endpoint(self, port: int) -> Dict[str, Any]:
        """``{endpoint, headers}``: how a client outside reaches ``port`` in the sandbox."""
        return self._t.call("GET", self._path("/endpoints/%d" % port))

    def logs(self) -> str:
        """What execd logged and the entrypoint printed (a bounded ring, oldest dropped)."""
        return self._execd("GET", "/logs").read().decode("utf-8", "replace")

    # ---- into the sandbox: the router in front of a port
    def proxy(self, method: str, port: int, path: str, **kw: Any) -> Response:
        """A request to ``port`` inside the sandbox (through the router)."""
        return self._t.open(method, "/sandboxes/%s/proxy/%d%s" % (quote(self.id, safe=""), port,
                                                                   path), **kw)

    def _execd(self, method: str, path: str, **kw: Any) -> Response:
        return self.proxy(method, EXECD_PORT, path, **kw)

    def _execd_json(self, method: str, path: str, **kw: Any) -> Any:
        return self._execd(method, path, **kw).json()
