"""Stateful code in a sandbox: contexts (a Python kernel, a bash session) that keep their
variables and working directory between runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ._http import iter_sse
from .commands import Execution, OutputHandler, consume

if TYPE_CHECKING:
    from .sandbox import Sandbox


@dataclass
class Context:
    id: str
    language: str
    cwd: Optional[str] = None


class Code:
    """``sandbox.code``."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def create_context(self, language: str = "python", cwd: Optional[str] = None) -> Context:
        """A new context: ``python`` (an ipykernel) or ``bash``."""
        body: Dict[str, Any] = {"language": language}
        if cwd:
            body["cwd"] = cwd
        j = self._sb._execd_json("POST", "/code/context", json_body=body, timeout=120)
        return Context(id=j["id"], language=j.get("language", language), cwd=j.get("cwd"))

    def contexts(self, language: Optional[str] = None) -> List[Context]:
        j = self._sb._execd_json("GET", "/code/contexts",
                                 query={"language": language} if language else None)
        return [Context(id=x["id"], language=x.get("language", "")) for x in (j or [])]

    def delete_context(self, context: "Context | str") -> None:
        cid = context.id if isinstance(context, Context) else context
        self._sb._execd("DELETE", "/code/contexts/" + cid).read()

    def run(self, code: str, *, context: "Context | str | None" = None,
            language: str = "python", on_stdout: Optional[OutputHandler] = None,
            on_stderr: Optional[OutputHandler] = None, timeout: float = 3600) -> Execution:
        """Run ``code`` in ``context`` (or the language's default context). Kernel output is
        not line-split (``stdout`` holds what the kernel sent); results (``2+2``) are in
        ``results`` as MIME bundles (``{"text": "4"}``); an exception sets ``error``
        (``ename``, ``evalue``, ``traceback``)."""
        ctx: Dict[str, Any] = {"language": language}
        if isinstance(context, Context):
            ctx = {"id": context.id, "language": context.language}
        elif context:
            ctx = {"id": context}
        r = self._sb._execd("POST", "/code", json_body={"context": ctx, "code": code},
                            timeout=timeout)
        return consume(iter_sse(r.iter_chunks()), on_stdout, on_stderr)

    def interrupt(self, run_or_context_id: str) -> None:
        self._sb._execd("DELETE", "/code", query={"id": run_or_context_id}).read()
