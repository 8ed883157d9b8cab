"""The entry point: a :class:`Client` for one sbx server."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._http import DEFAULT_TIMEOUT, Transport, resolve
from .sandbox import Sandbox, SandboxInfo


class Client:
    """A server. ``url`` (``host:port`` or ``http(s)://...``) and ``api_key`` default as the
    CLI's do: ``SBX_HOST`` (else ``127.0.0.1:8080``), ``SBX_API_KEY``, else the ``api-key``
    file of ``SBX_STATE_DIR`` (else ``/var/lib/sbx``) — a server on this host."""

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        u, key = resolve(url, api_key)
        self._t = Transport(u, key, timeout)

    @property
    def url(self) -> str:
        return self._t.url

    def health(self) -> bool:
        return (self._t.call("GET", "/health") or {}).get("status") == "healthy"

    def create(self, image: str = "host", *, entrypoint: Optional[Sequence[str]] = None,
               env: Optional[Mapping[str, str]] = None, timeout: Optional[int] = 600,
               cpu: Optional[str] = None, memory: Optional[str] = None,
               metadata: Optional[Mapping[str, str]] = None, provider: Optional[str] = None,
               extensions: Optional[Mapping[str, str]] = None,
               volumes: Optional[List[Dict[str, Any]]] = None,
               desktop: "bool | str" = False, reuse_key: Optional[str] = None,
               request_timeout: float = 300) -> Sandbox:
        """Make a sandbox and return once it runs.

        ``timeout``: seconds until it expires (None: never). ``desktop``: True (the default
        size) or ``"WxH"``/``"WxHxD"`` starts a desktop in it. ``reuse_key``: find-or-create,
        the same sandbox for the same key and spec.
        """
        limits: Dict[str, str] = {}
        if cpu:
            limits["cpu"] = str(cpu)
        if memory:
            limits["memory"] = str(memory)
        ext: Dict[str, str] = dict(extensions or {})
        if desktop:
            ext["sbx.desktop"] = "true" if desktop is True else str(desktop)
        if reuse_key:
            ext["reuseKey"] = reuse_key
        body: Dict[str, Any] = {
            "image": {"uri": image},
            "entrypoint": list(entrypoint or ["tail", "-f", "/dev/null"]),
            "timeout": timeout,
            "resourceLimits": limits or {"cpu": "1", "memory": "2Gi"},
        }
        if env:
            body["env"] = dict(env)
        if metadata:
            body["metadata"] = dict(metadata)
        if provider:
            body["provider"] = provider
        if ext:
            body["extensions"] = ext
        if volumes:
            body["volumes"] = volumes
        j = self._t.call("POST", "/v1/sandboxes", json_body=body, timeout=request_timeout)
        return Sandbox(self._t, j["id"], SandboxInfo.from_json(j) if "status" in j else None)

    def connect(self, sandbox_id: str) -> Sandbox:
        """A handle on an existing sandbox (checked: ``NotFoundError`` if there is none)."""
        sb = Sandbox(self._t, sandbox_id)
        sb.info()
        return sb

    def list(self, *, states: Optional[Sequence[str]] = None,
             metadata: Optional[Mapping[str, str]] = None, page_size: int = 200
             ) -> List[SandboxInfo]:
        """Every sandbox (all pages), newest first, filtered by state and labels."""
        from urllib.parse import urlencode
        out: List[SandboxInfo] = []
        page = 1
        while True:
            q: List[Any] = [("page", page), ("pageSize", page_size)]
            q.extend(("state", s) for s in states or [])
            if metadata:
                q.append(("metadata", urlencode(dict(metadata))))
            j = self._t.call("GET", "/v1/sandboxes", query=q)
            out.extend(SandboxInfo.from_json(x) for x in j.get("items", []))
            if not (j.get("pagination") or {}).get("hasNextPage"):
                return out
            page += 1
