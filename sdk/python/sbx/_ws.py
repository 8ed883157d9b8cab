"""A small WebSocket client (RFC 6455) over a connection the transport opened: text and binary
messages, pings answered. The SDK uses it for Chromium's DevTools through the server's router
(the router splices upgrades to the sandbox's port)."""

from __future__ import annotations

import base64
import os
import socket
import struct
from typing import Mapping, Optional, Union

from .errors import ConnectionFailed


class WebSocket:
    def __init__(self, sock: socket.socket, host: str, path: str,
                 headers: Optional[Mapping[str, str]] = None) -> None:
        self.sock = sock
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET %s HTTP/1.1" % path, "Host: %s" % host, "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: " + key,
                 "Sec-WebSocket-Version: 13"]
        lines += ["%s: %s" % kv for kv in (headers or {}).items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionFailed("WEBSOCKET", "closed during the handshake")
            self.buf += chunk
            if len(self.buf) > 1 << 16:
                raise ConnectionFailed("WEBSOCKET", "handshake answer too long")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        status = head.split(b" ", 2)[1] if b" " in head else b""
        if status != b"101":
            raise ConnectionFailed("WEBSOCKET", "handshake answered %s: %s" % (
                status.decode("latin-1"), (self.buf or head)[:200].decode("latin-1")))

    def send(self, data: Union[str, bytes], opcode: Optional[int] = None) -> None:
        payload = data.encode() if isinstance(data, str) else data
        op = opcode if opcode is not None else (1 if isinstance(data, str) else 2)
        n = len(payload)
        head = bytes([0x80 | op])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(payload)))

    def _need(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionFailed("WEBSOCKET", "closed by the peer")
            self.buf += chunk

    def recv(self) -> Union[str, bytes]:
        """The next text or binary message (fragments joined)."""
        parts, first = b"", 0
        while True:
            self._need(2)
            fin, op, n = self.buf[0] & 0x80, self.buf[0] & 0x0F, self.buf[1] & 0x7F
            pos = 2
            if n == 126:
                self._need(4)
                n, pos = struct.unpack(">H", self.buf[2:4])[0], 4
            elif n == 127:
                self._need(10)
                n, pos = struct.unpack(">Q", self.buf[2:10])[0], 10
            self._need(pos + n)
            payload, self.buf = self.buf[pos:pos + n], self.buf[pos + n:]
            if op == 9:
                self.send(payload, opcode=10)
            elif op == 8:
                raise ConnectionFailed("WEBSOCKET", "closed by the peer")
            elif op in (0, 1, 2):
                first = first or op
                parts += payload
                if fin:
                    return parts.decode() if first == 1 else parts

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

