"""The SDK's HTTP transport: http.client (standard library), one connection per call, JSON
bodies, streamed bodies both ways, the sbx error format turned into exceptions."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import urllib.parse
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

from .errors import ConnectionFailed, SbxError, from_status

if TYPE_CHECKING:
    from ._ws import WebSocket

DEFAULT_HOST = "127.0.0.1:8080"
DEFAULT_STATE_DIR = "/var/lib/sbx"
DEFAULT_TIMEOUT = 60.0

Query = Optional[Union[Mapping[str, Any], Sequence[Tuple[str, Any]]]]
Body = Optional[Union[bytes, Iterable[bytes]]]


def normalise_url(host: str) -> str:
    """``host:port`` or a URL, without trailing slashes; http when no scheme is given."""
    host = host.rstrip("/")
    return host if "://" in host else "http://" + host


def key_from_state_dir(state_dir: str) -> Optional[str]:
    """The API key a server on this host wrote into its state dir (mode 0600), if readable."""
    try:
        with open(os.path.join(state_dir, "api-key"), encoding="utf-8") as f:
            key = f.read().strip()
    except OSError:
        return None
    return key or None


def resolve(url: Optional[str], api_key: Optional[str]) -> Tuple[str, Optional[str]]:
    """Defaults as the CLI's: SBX_HOST, SBX_API_KEY, then SBX_STATE_DIR's (or /var/lib/sbx's)
    api-key file."""
    url = url or os.environ.get("SBX_HOST") or DEFAULT_HOST
    if not api_key:
        api_key = os.environ.get("SBX_API_KEY") or None
    if not api_key:
        api_key = key_from_state_dir(os.environ.get("SBX_STATE_DIR") or DEFAULT_STATE_DIR)
    return normalise_url(url), api_key


def tls_context() -> ssl.SSLContext:
    """Certificates and host names verified, against the system's CAs or, as the CLI does,
    the PEM file named by SBX_CA_CERT (a server behind a TLS proxy with a private CA)."""
    return ssl.create_default_context(cafile=os.environ.get("SBX_CA_CERT") or None)


class Response:
    """An answer whose body has not been read yet (for streaming); use it as a context
    manager or call :meth:`close`."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp
        self.status = resp.status
        self.headers: Dict[str, str] = {k.lower(): v for k, v in resp.getheaders()}

    def read(self) -> bytes:
        try:
            return self._resp.read()
        finally:
            self.close()

    def json(self) -> Any:
        data = self.read()
        return json.loads(data) if data else None

    def iter_chunks(self, size: int = 65536) -> Iterator[bytes]:
        """The body as it arrives (read1: whatever is there, up to size)."""
        try:
            while True:
                chunk = self._resp.read1(size)
                if not chunk:
                    return
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        self._resp.close()
        self._conn.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _query_string(query: Query) -> str:
    if not query:
        return ""
    pairs: List[Tuple[str, str]] = []
    items = query.items() if isinstance(query, Mapping) else query
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            pairs.extend((k, str(x)) for x in v)
        else:
            pairs.append((k, str(v).lower() if isinstance(v, bool) else str(v)))
    return "?" + urllib.parse.urlencode(pairs) if pairs else ""


class Transport:
    """One server: base URL, API key, default timeout."""

    def __init__(self, url: str, api_key: Optional[str], timeout: float = DEFAULT_TIMEOUT) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("server URL must be http(s)://host[:port], not %r" % url)
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=t,
                                               context=tls_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=t)

    def open(self, method: str, path: str, *, query: Query = None, json_body: Any = None,
             body: Body = None, headers: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = None, ok: Sequence[int] = (200, 201, 202, 204, 206)
             ) -> Response:
        """Send a request; return the unread answer, or raise the API's error."""
        h: Dict[str, str] = dict(headers or {})
        if self.api_key:
            h["OPEN-SANDBOX-API-KEY"] = self.api_key
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h["Content-Type"] = "application/json"
        conn = self._connect(timeout)
        try:
            conn.request(method, self._prefix + path + _query_string(query), body=body,
                         headers=h, encode_chunked=body is not None
                         and not isinstance(body, bytes) and "Content-Length" not in h)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionFailed("CONNECTION_ERROR", "%s %s: %s" % (method, self.url + path, e))
        r = Response(conn, resp)
        if r.status not in ok:
            raise _error(r)
        return r

    def websocket(self, path: str, timeout: Optional[float] = None) -> "WebSocket":
        """A WebSocket to path on the server (with the API key), e.g. through the router."""
        from ._ws import WebSocket
        conn = self._connect(timeout)
        try:
            conn.connect()
            host = "%s:%d" % (self._host, self._port or (443 if self._https else 80))
            return WebSocket(conn.sock, host, self._prefix + path,
                             {"OPEN-SANDBOX-API-KEY": self.api_key} if self.api_key else None)
        except OSError as e:
            conn.close()
            raise ConnectionFailed("CONNECTION_ERROR", "WebSocket %s: %s" % (path, e))

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """A request whose answer is JSON (or empty): the decoded body."""
        return self.open(method, path, **kw).json()


def _error(r: Response) -> SbxError:
    rid = r.headers.get("x-request-id")
    try:
        raw = r.read()
    except (OSError, http.client.HTTPException, socket.timeout):
        raw = b""
    code, message = "HTTP_%d" % r.status, raw.decode("utf-8", "replace")[:2000]
    try:
        j = json.loads(raw)
        if isinstance(j, dict):
            code = str(j.get("code") or code)
            message = str(j.get("message") or j.get("error") or message)
    except ValueError:
        pass
    return from_status(r.status, code, message, rid)


def iter_sse(chunks: Iterable[bytes]) -> Iterator[Dict[str, Any]]:
    """The events of an execd stream: each a JSON object in a frame ended by a blank line
    (``data:`` prefixes, as some servers send them, are accepted too)."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        while True:
            end = buf.find(b"\n\n")
            if end < 0:
                break
            frame, buf = buf[:end], buf[end + 2:]
            text = frame.strip()
            if text.startswith(b"data:"):
                text = text[5:].strip()
            if text:
                yield json.loads(text)
    if buf.strip():
        yield json.loads(buf.strip())
