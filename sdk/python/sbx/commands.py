"""Commands in a sandbox: run (streamed, with callbacks), background runs, status, logs,
interrupt. Talks to the sandbox's execd through the server's router."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from ._http import iter_sse
from .errors import CommandError, SbxError

if TYPE_CHECKING:
    from .sandbox import Sandbox

OutputHandler = Callable[[str], None]


@dataclass
class Execution:
    """The result of a run.

    ``stdout``/``stderr`` are the lines (without their newline) in order; ``exit_code`` is 0
    when the command succeeded, its status when it failed, None when it did not finish (a
    background run, an interrupt). ``error`` is execd's error event, if any.
    """

    id: str = ""
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)
    exit_code: Optional[int] = None
    error: Optional[Dict[str, Any]] = None
    execution_time_ms: Optional[int] = None
    results: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """stdout joined with newlines."""
        return "\n".join(self.stdout)


@dataclass
class CommandStatus:
    id: str
    running: bool
    exit_code: Optional[int]
    content: str = ""
    error: Optional[str] = None


def consume(events: Any, on_stdout: Optional[OutputHandler] = None,
            on_stderr: Optional[OutputHandler] = None,
            on_event: Optional[Callable[[Dict[str, Any]], None]] = None) -> Execution:
    """Fold an execd event stream into an :class:`Execution` (also used by code runs)."""
    ex = Execution()
    for ev in events:
        if on_event:
            on_event(ev)
        kind = ev.get("type")
        if kind == "init":
            ex.id = ev.get("text", "")
        elif kind == "stdout":
            text = ev.get("text", "")
            ex.stdout.append(text)
            if on_stdout:
                on_stdout(text)
        elif kind == "stderr":
            text = ev.get("text", "")
            ex.stderr.append(text)
            if on_stderr:
                on_stderr(text)
        elif kind == "result":
            ex.results.append(ev.get("results") or {k: v for k, v in ev.items()
                                                    if k not in ("type", "timestamp")})
        elif kind == "execution_complete":
            ex.execution_time_ms = ev.get("execution_time")
            if ex.error is None:
                ex.exit_code = 0
        elif kind == "error":
            ex.error = ev.get("error") or {}
            value = str(ex.error.get("evalue", ""))
            ex.exit_code = int(value) if value.lstrip("-").isdigit() else None
    return ex


class Commands:
    """``sandbox.commands``."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def run(self, command: str, *, cwd: Optional[str] = None,
            envs: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
            background: bool = False, on_stdout: Optional[OutputHandler] = None,
            on_stderr: Optional[OutputHandler] = None, check: bool = False) -> Execution:
        """Run ``command`` with ``bash -c`` (``sh`` where the image has no bash).

        Output is streamed: ``on_stdout``/``on_stderr`` get each line as it comes. ``timeout``
        (seconds) kills the command's process group. ``background=True`` returns at once with
        the command's id (see :meth:`status`, :meth:`logs`). ``check=True`` raises
        :class:`CommandError` on a non-zero exit.
        """
        body: Dict[str, Any] = {"command": command}
        if cwd:
            body["cwd"] = cwd
        if envs:
            body["envs"] = dict(envs)
        if timeout:
            body["timeout"] = int(timeout * 1000)
        if background:
            body["background"] = True
        read_timeout = None if timeout is None else timeout + 30
        r = self._sb._execd("POST", "/command", json_body=body, timeout=read_timeout or 3600)
        ex = consume(iter_sse(r.iter_chunks()), on_stdout, on_stderr)
        if check and not background and ex.exit_code != 0:
            raise CommandError("`%s` exited with %s: %s" % (command, ex.exit_code,
                                                            "\n".join(ex.stderr[-5:])),
                               ex.exit_code)
        return ex

    def status(self, command_id: str) -> CommandStatus:
        j = self._sb._execd_json("GET", "/command/status/" + command_id)
        return CommandStatus(id=j.get("id", command_id), running=bool(j.get("running")),
                             exit_code=j.get("exit_code"), content=j.get("content", ""),
                             error=j.get("error"))

    def wait(self, command_id: str, timeout: float = 60.0, interval: float = 0.05
             ) -> CommandStatus:
        """Poll a background command until it has finished (or raise on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status(command_id)
            if not st.running:
                return st
            if time.monotonic() > deadline:
                raise SbxError("TIMEOUT", "command %s still running after %.0f s"
                               % (command_id, timeout))
            time.sleep(interval)

    def logs(self, command_id: str, cursor: int = 0) -> "tuple[str, int]":
        """A background command's output from byte ``cursor``: ``(text, next cursor)``."""
        r = self._sb._execd("GET", "/command/%s/logs" % command_id, query={"cursor": cursor})
        nxt = int(r.headers.get("execd-commands-tail-cursor", cursor))
        return r.read().decode("utf-8", "replace"), nxt

    def interrupt(self, command_id: str) -> None:
        """SIGTERM to the command's process group (SIGKILL after 3 s)."""
        self._sb._execd("DELETE", "/command", query={"id": command_id}).read()
