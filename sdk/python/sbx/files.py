"""Files in a sandbox: read, write, upload and download (streamed both ways), info, listing,
directories, search, move, replace, permissions, delete."""

from __future__ import annotations

import io
import json
import os
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Dict, Iterator, List, Mapping, Optional, Union

if TYPE_CHECKING:
    from .sandbox import Sandbox

CHUNK = 1 << 20
Source = Union[bytes, str, "os.PathLike[str]", BinaryIO]


@dataclass
class FileInfo:
    path: str
    size: int
    mode: int
    type: str = "file"
    owner: str = ""
    group: str = ""
    modified_at: str = ""
    created_at: str = ""

    @classmethod
    def from_json(cls, path: str, j: Mapping[str, Any]) -> "FileInfo":
        return cls(path=j.get("path", path), size=int(j.get("size", 0)),
                   mode=int(j.get("mode", 0)), type=j.get("type", "file"),
                   owner=j.get("owner", ""), group=j.get("group", ""),
                   modified_at=j.get("modified_at", ""), created_at=j.get("created_at", ""))


def _open_source(src: Source) -> "tuple[BinaryIO, int, bool]":
    """(stream, size, close it afterwards) for bytes, a text string, a path or a file."""
    if isinstance(src, bytes):
        return io.BytesIO(src), len(src), True
    if isinstance(src, str) and not os.path.exists(src):
        data = src.encode()
        return io.BytesIO(data), len(data), True
    if isinstance(src, (str, os.PathLike)):
        f = open(src, "rb")  # noqa: SIM115 - closed by the caller
        return f, os.fstat(f.fileno()).st_size, True
    pos = src.tell()
    size = src.seek(0, io.SEEK_END) - pos
    src.seek(pos)
    return src, size, False


class Files:
    """``sandbox.files``. Paths are absolute paths inside the sandbox."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    # ---- contents
    def read(self, path: str, *, range: Optional[str] = None) -> bytes:
        """The file's bytes (``range``: an HTTP range such as ``"bytes=0-99"``)."""
        headers = {"Range": range} if range else None
        return self._sb._execd("GET", "/files/download", query={"path": path},
                               headers=headers).read()

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def write(self, path: str, data: Union[bytes, str], *, mode: Optional[int] = None) -> None:
        """Create or replace ``path`` with ``data`` (atomically: a reader sees the old file or
        the new one). ``mode`` in octal digits as the API takes it, e.g. ``644``."""
        self.upload(data.encode() if isinstance(data, str) else data, path, mode=mode)

    def upload(self, src: Source, path: str, *, mode: Optional[int] = None,
               owner: Optional[str] = None, group: Optional[str] = None) -> None:
        """Send a local file (a path, an open binary file, or bytes) to ``path``, streamed:
        memory use does not grow with the file's size."""
        self.upload_many([(src, path)], mode=mode, owner=owner, group=group)

    def upload_many(self, items: "List[tuple[Source, str]]", *, mode: Optional[int] = None,
                    owner: Optional[str] = None, group: Optional[str] = None) -> None:
        """Several files in one request."""
        boundary = "sbx-" + uuid.uuid4().hex
        opened = [(_open_source(src), dst) for src, dst in items]
        heads: List[bytes] = []
        total = 0
        for (stream, size, _), dst in opened:
            meta: Dict[str, Any] = {"path": dst}
            for k, v in (("mode", mode), ("owner", owner), ("group", group)):
                if v is not None:
                    meta[k] = v
            head = ("--%s\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
                    "Content-Type: application/json\r\n\r\n%s\r\n"
                    "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                    "Content-Type: application/octet-stream\r\n\r\n"
                    % (boundary, json.dumps(meta), boundary,
                       os.path.basename(dst).replace('"', "_"))).encode()
            heads.append(head)
            total += len(head) + size + 2
        tail = ("--%s--\r\n" % boundary).encode()
        total += len(tail)

        def body() -> Iterator[bytes]:
            for head, ((stream, _size, _), _dst) in zip(heads, opened):
                yield head
                while True:
                    chunk = stream.read(CHUNK)
                    if not chunk:
                        break
                    yield chunk
                yield b"\r\n"
            yield tail

        try:
            self._sb._execd("POST", "/files/upload", body=body(), timeout=3600,
                            headers={"Content-Type": "multipart/form-data; boundary=" + boundary,
                                     "Content-Length": str(total)}).read()
        finally:
            for (stream, _, close), _ in opened:
                if close:
                    stream.close()

    def download(self, path: str, dst: Union[str, "os.PathLike[str]", BinaryIO]) -> int:
        """Copy ``path`` to a local file (a path: written to a temporary name next to it and
        renamed when complete) or an open binary file, streamed. Returns the byte count."""
        r = self._sb._execd("GET", "/files/download", query={"path": path}, timeout=3600)
        if not isinstance(dst, (str, os.PathLike)):
            n = 0
            for chunk in r.iter_chunks(CHUNK):
                dst.write(chunk)
                n += len(chunk)
            return n
        target = os.fspath(dst)
        tmp = "%s.sbx-partial-%s" % (target, uuid.uuid4().hex)
        n = 0
        try:
            # O_EXCL | O_NOFOLLOW: a name planted in the directory is never written through
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                for chunk in r.iter_chunks(CHUNK):
                    f.write(chunk)
                    n += len(chunk)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return n

    # ---- metadata and directories
    def info(self, *paths: str) -> Dict[str, FileInfo]:
        """Metadata of each path (``NotFoundError`` if one is missing)."""
        j = self._sb._execd_json("GET", "/files/info", query=[("path", p) for p in paths])
        return {p: FileInfo.from_json(p, v) for p, v in (j or {}).items()}

    def exists(self, path: str) -> bool:
        from .errors import NotFoundError
        try:
            self.info(path)
            return True
        except NotFoundError:
            return False

    def list(self, path: str, depth: int = 1) -> List[FileInfo]:
        j = self._sb._execd_json("GET", "/directories/list", query={"path": path, "depth": depth})
        items = j if isinstance(j, list) else (j or {}).get("entries", [])
        return [FileInfo.from_json(x.get("path", ""), x) for x in items]

    def mkdir(self, path: str, *, mode: int = 755) -> None:
        """``mkdir -p`` with ``mode`` (octal digits)."""
        self._sb._execd_json("POST", "/directories", json_body={path: {"mode": mode}})

    def remove(self, *paths: str) -> None:
        """Delete files (missing ones are fine; directories are refused: see :meth:`rmdir`)."""
        self._sb._execd("DELETE", "/files", query=[("path", p) for p in paths]).read()

    def rmdir(self, *paths: str) -> None:
        """``rm -rf`` of directories."""
        self._sb._execd("DELETE", "/directories", query=[("path", p) for p in paths]).read()

    def move(self, src: str, dest: str) -> None:
        """Rename (never replaces an existing ``dest``)."""
        self._sb._execd_json("POST", "/files/mv", json_body=[{"src": src, "dest": dest}])

    def chmod(self, path: str, mode: int, *, owner: Optional[str] = None,
              group: Optional[str] = None) -> None:
        perm: Dict[str, Any] = {"mode": mode}
        if owner:
            perm["owner"] = owner
        if group:
            perm["group"] = group
        self._sb._execd_json("POST", "/files/permissions", json_body={path: perm})

    def search(self, path: str, pattern: str = "**") -> List[FileInfo]:
        """Files below ``path`` whose base name matches the glob ``pattern``."""
        j = self._sb._execd_json("GET", "/files/search", query={"path": path, "pattern": pattern})
        return [FileInfo.from_json(x.get("path", ""), x) for x in (j or [])]

    def replace(self, path: str, old: str, new: str) -> None:
        """Replace ``old`` with ``new`` in the file (atomic rewrite, mode kept)."""
        self._sb._execd_json("POST", "/files/replace", json_body={path: {"old": old, "new": new}})
