"""Exceptions of the sbx SDK: every failed API call raises an :class:`SbxError` that carries
the server's ``{code, message}``, the HTTP status and the request id."""

from __future__ import annotations

from typing import Optional


class SbxError(Exception):
    """An API call failed.

    Attributes:
        code: the API's error code (``"SANDBOX::NOT_FOUND"``), or a local one such as
            ``"CONNECTION_ERROR"`` when the server could not be reached.
        message: the API's message.
        status: the HTTP status, or 0 when there was no answer.
        request_id: the server's ``X-Request-ID`` of the call, when there was one.
    """

    def __init__(self, code: str, message: str, status: int = 0,
                 request_id: Optional[str] = None) -> None:
        super().__init__("%s: %s" % (code, message) if code else message)
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id


class NotFoundError(SbxError):
    """404: no such sandbox, file, context..."""


class ConflictError(SbxError):
    """409: the sandbox is not in a state that allows the call."""


class AuthError(SbxError):
    """401/403: the API key is missing or wrong."""


class ConnectionFailed(SbxError):
    """The server could not be reached (or the connection broke)."""


class CommandError(SbxError):
    """A command run with ``check=True`` exited with a non-zero status."""

    def __init__(self, message: str, exit_code: Optional[int]) -> None:
        super().__init__("COMMAND_FAILED", message)
        self.exit_code = exit_code


def from_status(status: int, code: str, message: str,
                request_id: Optional[str] = None) -> SbxError:
    """The exception class for an HTTP status."""
    cls = SbxError
    if status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    elif status in (401, 403):
        cls = AuthError
    return cls(code, message, status, request_id)
