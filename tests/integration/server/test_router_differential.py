#!/usr/bin/python3
"""The router's reading of a sandbox's HTTP response against h11's (a reference parser).

The upstream of the router is the sandbox, so a response two parsers read differently is how a
sandbox would smuggle a second response past the router or split one. Each case below (request
smuggling's usual suspects, then generated mutations of them) goes through the router's own
code (tests/helpers/httpresp_verdict.c: server/httphead.c and common/chunked.c, as proxy.c
calls them) and through h11:

- where h11 refuses a response, the router refuses it too (LAXER lists the exceptions: none);
- where both accept it, status, framing, body and the bytes left after it are the same;
- where the router refuses what h11 accepts, the case must be in STRICTER with the reason
  (hand-written cases; for mutations such cases are only counted).

usage: test_router_differential.py HTTPRESP_VERDICT
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional

try:
    import h11
    from h11._connection import _body_framing  # the framing h11 applies to a response
except ImportError:
    print("SKIP: python3-h11 is not installed (scripts/deps.sh)")
    sys.exit(77)

CRLF = b"\r\n"


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    why: str = ""
    status: int = 0
    framing: str = ""  # "length:N", "chunked", "close"
    body: bytes = b""
    rest: bytes = b""

    def same_message(self, other: "Verdict") -> bool:
        return (self.status, self.framing, self.body, self.rest) == (
            other.status, other.framing, other.body, other.rest)


def head(*lines: bytes, status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    return status + CRLF + b"".join(line + CRLF for line in lines) + CRLF


def chunked(*lines: bytes) -> bytes:
    return head(b"Transfer-Encoding: chunked", *lines)


CL5 = b"Content-Length: 5"
TE = b"Transfer-Encoding: chunked"
GOOD_CHUNKS = b"5\r\nhello\r\n0\r\n\r\n"

# (name, response bytes, request method)
CASES: list[tuple[str, bytes, str]] = [
    ("plain length", head(CL5) + b"hello", "GET"),
    ("length then more", head(CL5) + b"helloHTTP/1.1 200 OK\r\n\r\n", "GET"),
    ("length, truncated", head(CL5) + b"hel", "GET"),
    ("length zero", head(b"Content-Length: 0") + b"extra", "GET"),
    ("until close", head(b"X: y") + b"all of it", "GET"),
    ("http/1.0 until close", head(status=b"HTTP/1.0 200 OK") + b"body", "GET"),
    ("no reason phrase", head(CL5, status=b"HTTP/1.1 200") + b"hello", "GET"),
    ("empty reason", head(CL5, status=b"HTTP/1.1 200 ") + b"hello", "GET"),
    ("chunked", chunked() + GOOD_CHUNKS, "GET"),
    ("chunked, rest", chunked() + GOOD_CHUNKS + b"GARBAGE", "GET"),
    ("chunked upper-case hex", chunked() + b"A\r\n0123456789\r\n0\r\n\r\n", "GET"),
    ("chunked, leading zeros in size", chunked() + b"0005\r\nhello\r\n000\r\n\r\n", "GET"),
    ("chunked, extension", chunked() + b"5;a=b\r\nhello\r\n0;x\r\n\r\n", "GET"),
    ("chunked, quoted extension", chunked() + b'5;a="b;c"\r\nhello\r\n0\r\n\r\n', "GET"),
    ("chunked, OWS after size", chunked() + b"5 \r\nhello\r\n0\t\r\n\r\n", "GET"),
    ("chunked, BWS before ;", chunked() + b"5 ;a\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, leading space in size", chunked() + b" 5\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, + size", chunked() + b"+5\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, - size", chunked() + b"-5\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, 0x size", chunked() + b"0x5\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, empty size", chunked() + b"\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, size overflow 2^64", chunked() + b"10000000000000005\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, size 16 digits", chunked() + b"0000000000000005\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, size 20 digits", chunked() + b"00000000000000000005\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, bare LF after size", chunked() + b"5\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, bare LF in extension", chunked() + b"5;a\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, bare CR in extension", chunked() + b"5;a\rb\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, NUL in extension", chunked() + b"5;a\x00\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, bare LF after data", chunked() + b"5\r\nhello\n0\r\n\r\n", "GET"),
    ("chunked, no CRLF after data", chunked() + b"5\r\nhello0\r\n\r\n", "GET"),
    ("chunked, data longer than size", chunked() + b"3\r\nhello\r\n0\r\n\r\n", "GET"),
    ("chunked, missing final CRLF", chunked() + b"5\r\nhello\r\n0\r\n", "GET"),
    ("chunked, missing last chunk", chunked() + b"5\r\nhello\r\n", "GET"),
    ("chunked, trailer", chunked() + b"5\r\nhello\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\nrest", "GET"),
    ("chunked, trailer bare LF", chunked() + b"5\r\nhello\r\n0\r\nX-T: 1\n\r\nrest\r\n\r\n", "GET"),
    ("chunked, trailer ending bare LF", chunked() + b"5\r\nhello\r\n0\r\nX: 1\r\n\n", "GET"),
    ("chunked, trailer without colon", chunked() + b"5\r\nhello\r\n0\r\nX\r\n\r\n", "GET"),
    ("chunked, trailer obs-fold", chunked() + b"5\r\nhello\r\n0\r\nX: 1\r\n 2\r\n\r\n", "GET"),
    ("chunked, trailer space before colon", chunked() + b"5\r\nhello\r\n0\r\nX : 1\r\n\r\n", "GET"),
    ("chunked, trailer NUL", chunked() + b"5\r\nhello\r\n0\r\nX: a\x00b\r\n\r\n", "GET"),
    ("chunked, trailer is a head", chunked() + b"0\r\nContent-Length: 5\r\n\r\nhello", "GET"),
    ("CL+TE", head(CL5, TE) + GOOD_CHUNKS, "GET"),
    ("TE+CL", head(TE, CL5) + GOOD_CHUNKS, "GET"),
    ("CL+TE, CL 0", head(b"Content-Length: 0", TE) + GOOD_CHUNKS, "GET"),
    ("TE gzip", head(b"Transfer-Encoding: gzip") + b"hello", "GET"),
    ("TE gzip, chunked", head(b"Transfer-Encoding: gzip, chunked") + GOOD_CHUNKS, "GET"),
    ("TE chunked, chunked", head(b"Transfer-Encoding: chunked, chunked") + GOOD_CHUNKS, "GET"),
    ("TE twice", head(TE, TE) + GOOD_CHUNKS, "GET"),
    ("TE upper case", head(b"Transfer-Encoding: CHUNKED") + GOOD_CHUNKS, "GET"),
    ("TE identity", head(b"Transfer-Encoding: identity", CL5) + b"hello", "GET"),
    ("TE empty", head(b"Transfer-Encoding:") + b"hello", "GET"),
    ("TE with tab", head(b"Transfer-Encoding:\tchunked") + GOOD_CHUNKS, "GET"),
    ("TE vertical tab", head(b"Transfer-Encoding: \x0bchunked") + GOOD_CHUNKS, "GET"),
    ("TE name with space", head(b"Transfer-Encoding : chunked") + GOOD_CHUNKS, "GET"),
    ("TE name with tab", head(b"Transfer-Encoding\t: chunked") + GOOD_CHUNKS, "GET"),
    ("TE obs-fold value", head(b"Transfer-Encoding:", b" chunked") + GOOD_CHUNKS, "GET"),
    ("TE quoted", head(b'Transfer-Encoding: "chunked"') + GOOD_CHUNKS, "GET"),
    ("TE chunked;x", head(b"Transfer-Encoding: chunked;x=1") + GOOD_CHUNKS, "GET"),
    ("duplicate CL equal", head(CL5, CL5) + b"hello", "GET"),
    ("duplicate CL conflicting", head(CL5, b"Content-Length: 6") + b"hello!", "GET"),
    ("CL list equal", head(b"Content-Length: 5, 5") + b"hello", "GET"),
    ("CL list conflicting", head(b"Content-Length: 5, 6") + b"hello!", "GET"),
    ("CL +5", head(b"Content-Length: +5") + b"hello", "GET"),
    ("CL -5", head(b"Content-Length: -5") + b"hello", "GET"),
    ("CL 0x5", head(b"Content-Length: 0x5") + b"hello", "GET"),
    ("CL leading zeros", head(b"Content-Length: 005") + b"hello", "GET"),
    ("CL spaces around", head(b"Content-Length:   5   ") + b"hello", "GET"),
    ("CL space inside", head(b"Content-Length: 5 5") + b"hello", "GET"),
    ("CL empty", head(b"Content-Length:") + b"hello", "GET"),
    ("CL huge", head(b"Content-Length: 99999999999999999999999") + b"hello", "GET"),
    ("CL 2^63", head(b"Content-Length: 9223372036854775808") + b"hello", "GET"),
    ("CL 5.0", head(b"Content-Length: 5.0") + b"hello", "GET"),
    ("CL name with space", head(b"Content-Length : 5") + b"hello", "GET"),
    ("CL obs-fold value", head(b"Content-Length:", b" 5") + b"hello", "GET"),
    ("CL upper case name", head(b"CONTENT-LENGTH: 5") + b"hello", "GET"),
    ("obs-fold", head(b"X: a", b" b", CL5) + b"hello", "GET"),
    ("obs-fold tab", head(b"X: a", b"\tb", CL5) + b"hello", "GET"),
    ("obs-fold first line", head(b" X: a", CL5) + b"hello", "GET"),
    ("bare LF header line", b"HTTP/1.1 200 OK\r\nX: a\nContent-Length: 5\r\n\r\nhello", "GET"),
    ("bare LF everywhere", b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", "GET"),
    ("bare LF status line", b"HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\nhello", "GET"),
    ("bare LF in reason", b"HTTP/1.1 200 O\nContent-Length: 2\r\n\r\nhello", "GET"),
    ("bare CR in reason", b"HTTP/1.1 200 O\rContent-Length: 5\r\n\r\nhello", "GET"),
    ("bare CR in value", head(b"X: a\rContent-Length: 5") + b"hello", "GET"),
    ("bare CR line end", b"HTTP/1.1 200 OK\r\nX: a\r\rContent-Length: 5\r\n\r\nhello", "GET"),
    ("bare LF then CRLF end", b"HTTP/1.1 200 OK\r\nContent-Length: 5\n\r\nhello", "GET"),
    ("NUL in value", head(b"X: a\x00b", CL5) + b"hello", "GET"),
    ("NUL line", head(b"X: a", b"\x00Content-Length: 5") + b"hello", "GET"),
    ("NUL in name", head(b"X\x00: a", CL5) + b"hello", "GET"),
    ("NUL in reason", head(CL5, status=b"HTTP/1.1 200 O\x00K") + b"hello", "GET"),
    ("space in name", head(b"X Y: a", CL5) + b"hello", "GET"),
    ("empty name", head(b": a", CL5) + b"hello", "GET"),
    ("no colon", head(b"X", CL5) + b"hello", "GET"),
    ("DEL in value", head(b"X: a\x7fb", CL5) + b"hello", "GET"),
    ("obs-text in value", head(b"X: caf\xe9", CL5) + b"hello", "GET"),
    ("obs-text in reason", head(CL5, status=b"HTTP/1.1 200 caf\xe9") + b"hello", "GET"),
    ("tab in value", head(b"X: a\tb", CL5) + b"hello", "GET"),
    ("HTTP/1.2", head(CL5, status=b"HTTP/1.2 200 OK") + b"hello", "GET"),
    ("HTTP/2.0", head(CL5, status=b"HTTP/2.0 200 OK") + b"hello", "GET"),
    ("lower-case http", head(CL5, status=b"http/1.1 200 OK") + b"hello", "GET"),
    ("two spaces after version", head(CL5, status=b"HTTP/1.1  200 OK") + b"hello", "GET"),
    ("status 2 digits", head(CL5, status=b"HTTP/1.1 20 OK") + b"hello", "GET"),
    ("status 4 digits", head(CL5, status=b"HTTP/1.1 2000 OK") + b"hello", "GET"),
    ("status 099", head(CL5, status=b"HTTP/1.1 099 OK") + b"hello", "GET"),
    ("status 600", head(CL5, status=b"HTTP/1.1 600 OK") + b"hello", "GET"),
    ("status 999", head(CL5, status=b"HTTP/1.1 999 OK") + b"hello", "GET"),
    ("leading CRLF", CRLF + head(CL5) + b"hello", "GET"),
    ("leading space", b" " + head(CL5) + b"hello", "GET"),
    ("100 then 200", head(status=b"HTTP/1.1 100 Continue") + head(CL5) + b"hello", "GET"),
    ("103 with headers then 200",
     head(b"Link: </a>; rel=preload", status=b"HTTP/1.1 103 Early Hints") + head(CL5) + b"hello",
     "GET"),
    ("two 1xx", head(status=b"HTTP/1.1 100 A") + head(status=b"HTTP/1.1 102 B") + chunked()
     + GOOD_CHUNKS, "GET"),
    ("1xx with CL body", head(CL5, status=b"HTTP/1.1 100 Continue") + b"hello" + head(CL5)
     + b"world", "GET"),
    ("1xx bad header", head(b"X", status=b"HTTP/1.1 100 Continue") + head(CL5) + b"hello", "GET"),
    ("1xx bare LF", b"HTTP/1.1 100 Continue\nX: y\r\n\r\n" + head(CL5) + b"hello", "GET"),
    ("1xx NUL", head(b"X: \x00", status=b"HTTP/1.1 100 Continue") + head(CL5) + b"hello", "GET"),
    ("1xx only", head(status=b"HTTP/1.1 100 Continue"), "GET"),
    ("101 unasked", head(b"Upgrade: websocket", b"Connection: Upgrade",
                          status=b"HTTP/1.1 101 Switching Protocols") + b"\x81\x00", "GET"),
    ("204 with CL body", head(CL5, status=b"HTTP/1.1 204 No Content") + b"hello", "GET"),
    ("204 chunked", head(TE, status=b"HTTP/1.1 204 No Content") + GOOD_CHUNKS, "GET"),
    ("304 with CL body", head(CL5, status=b"HTTP/1.1 304 Not Modified") + b"hello", "GET"),
    ("HEAD with CL", head(CL5) + b"hello", "HEAD"),
    ("HEAD chunked", chunked() + GOOD_CHUNKS, "HEAD"),
    ("HEAD CL+TE", head(CL5, TE) + GOOD_CHUNKS, "HEAD"),
    ("HEAD bad CL", head(b"Content-Length: x"), "HEAD"),
    ("no head end", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", "GET"),
    ("empty", b"", "GET"),
    ("not http", b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "GET"),
    ("many headers", head(*[b"X-%d: v" % i for i in range(100)], CL5) + b"hello", "GET"),
    ("too many headers", head(*[b"X-%d: v" % i for i in range(129)], CL5) + b"hello", "GET"),
]

# Cases the router refuses although h11 reads them: each is a reading another parser could make
# differently, or a thing no sandbox needs. Refusing costs the sandbox a 502, never the API.
STRICTER: dict[str, str] = {
    "chunked, bare CR in extension": "a bare CR may end the line for another parser",
    "chunked, NUL in extension": "controls in a size line: NUL-terminating readers stop there",
    "chunked, size 16 digits": "sizes are at most 15 hex digits: no overflow without a bignum",
    "chunked, size 20 digits": "same",
    "chunked, trailer bare LF": "h11 ends the trailer line at a bare LF, others do not",
    "chunked, trailer ending bare LF": "same: where the message ends must not be in doubt",
    "chunked, trailer obs-fold": "obs-fold is refused everywhere (RFC 9112 5.2 allows that)",
    "CL+TE": "RFC 9112 6.3 makes CL+TE a smuggling sign; h11 lets TE win",
    "TE+CL": "same",
    "CL+TE, CL 0": "same",
    "HEAD CL+TE": "same, even where the body is empty anyway",
    "CL list equal": "a list in Content-Length is read as a list by some parsers, not others",
    "obs-fold": "obs-fold is refused (RFC 9112 5.2: a recipient may reject the message)",
    "obs-fold tab": "same",
    "TE obs-fold value": "same",
    "CL obs-fold value": "same",
    "bare LF header line": "a bare LF ends a line for h11, not for others (RFC 9112 2.2)",
    "bare LF everywhere": "same",
    "bare LF then CRLF end": "same",
    "bare LF status line": "same",
    "1xx bare LF": "same",
    "bare LF in reason": "h11 ends the status line there and reads a Content-Length after it "
                         "that a reader ending lines at CRLF takes for the reason phrase",
    "DEL in value": "DEL is no field-vchar (RFC 9110 5.5); h11 takes any byte but NUL and space",
    "too many headers": "the router keeps at most 128 header lines",
    "HTTP/1.2": "the router speaks HTTP/1.0 and 1.1 only",
    "HTTP/2.0": "a response to an HTTP/1.1 request is HTTP/1.x",
    "status 600": "a status is 100-599 (RFC 9110 15)",
    "status 999": "same",
}

# Cases the router accepts although h11 refuses them, with the reason: none. The test fails if
# one appears and is not listed here.
LAXER: dict[str, str] = {}


class Router:
    """The harness in --batch mode: one process, one record in and one JSON line out."""

    def __init__(self, tool: str) -> None:
        self.proc = subprocess.Popen([tool, "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def verdict(self, data: bytes, method: str, piece: int = 0) -> Verdict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(b"%s %d %d\n" % (method.encode(), piece, len(data)) + data)
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"httpresp_verdict died ({self.proc.wait()}) on {data!r}")
        j = json.loads(line)
        if not j["accepted"]:
            return Verdict(False, why=j["why"])
        framing = j["framing"]
        body = bytes.fromhex(j["body"])
        if framing in ("none", "length"):  # h11 says content-length 0 where no body is read
            framing = f"length:{len(body)}"
        return Verdict(True, status=j["status"], framing=framing, body=body,
                       rest=bytes.fromhex(j["rest"]))

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)


def h11_framing(method: str, resp: h11.Response) -> str:
    kind, args = _body_framing(method.encode(), resp)
    if kind == "content-length":
        return f"length:{args[0]}"
    return "chunked" if kind == "chunked" else "close"


def reference(data: bytes, method: str) -> Verdict:
    """h11 as the router's client side: it sent `method / HTTP/1.1` with Connection: close,
    read the whole answer, then the connection closed."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/",
                          headers=[("Host", "sandbox"), ("Connection", "close")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    resp: Optional[h11.Response] = None
    body = b""
    try:
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
                return Verdict(False, why="h11: incomplete")
            if isinstance(ev, h11.Response):
                resp = ev
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                break
    except h11.ProtocolError as e:
        return Verdict(False, why=f"h11: {e}")
    assert resp is not None
    return Verdict(True, status=resp.status_code, framing=h11_framing(method, resp), body=body,
                   rest=conn.trailing_data[0])


# ---- generated mutations ----

INSERTS = [b"\r", b"\n", b"\r\n", b" ", b"\t", b"\x00", b"\x0b", b";", b":", b"0", b"5", b"a",
           b"-", b"+", b",", b"\x7f", b"\xff", b"\r\n\r\n", b"Content-Length: 1\r\n",
           b"Transfer-Encoding: chunked\r\n", b"0\r\n\r\n", b"HTTP/1.1 200 OK\r\n"]


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        at = rng.randint(0, len(b))
        if op == 0:
            b[at:at] = rng.choice(INSERTS)
        elif op == 1 and b:
            del b[min(at, len(b) - 1)]
        elif op == 2 and b:
            b[min(at, len(b) - 1)] = rng.randrange(256)
        else:  # swap a line end for its bare forms, or the other way round
            b = bytearray(bytes(b).replace(*rng.choice([(b"\r\n", b"\n"), (b"\r\n", b"\r"),
                                                        (b"\n", b"\r\n")]), 1))
    return bytes(b)


@dataclass
class Tally:
    both_accept: int = 0
    both_refuse: int = 0
    stricter: int = 0
    stricter_names: set[str] = field(default_factory=set)


def compare(tool: Router, name: str, data: bytes, method: str, tally: Tally,
            listed: bool) -> list[str]:
    ours = tool.verdict(data, method)
    ref = reference(data, method)
    if ours.accepted and ours != tool.verdict(data, method, piece=1):
        return [f"{name}: read in 1-byte pieces it reads differently"]
    if not ref.accepted and ours.accepted:
        if name in LAXER:
            return []
        return [f"{name}: h11 refuses ({ref.why}) but the router accepts {ours}; input {data!r}"]
    if ref.accepted and ours.accepted:
        tally.both_accept += 1
        if not ours.same_message(ref):
            return [f"{name}: the router reads {ours}, h11 reads {ref}; input {data!r}"]
        return []
    if ref.accepted:  # the router alone refuses
        tally.stricter += 1
        tally.stricter_names.add(name)
        if listed and name not in STRICTER:
            return [f"{name}: the router refuses ({ours.why}) what h11 reads as {ref}: "
                    "list it in STRICTER with the reason, or accept it"]
        return []
    tally.both_refuse += 1
    return []


def main() -> int:
    tool = Router(sys.argv[1])
    tally = Tally()
    failures: list[str] = []
    for name, data, method in CASES:
        failures += compare(tool, name, data, method, tally, listed=True)
    for name in sorted(set(STRICTER) - tally.stricter_names):  # the list stays true
        failures.append(f"{name}: listed in STRICTER, but the router does not refuse it alone")
    rng = random.Random(20261127)
    mutations = 0
    for name, data, method in CASES:
        for k in range(16):
            failures += compare(tool, f"{name} / mutation {k}", mutate(rng, data), method,
                                tally, listed=False)
            mutations += 1
    print(f"{len(CASES)} cases + {mutations} mutations: both accept {tally.both_accept}, "
          f"both refuse {tally.both_refuse}, only the router refuses {tally.stricter}")
    for f in failures:
        print("FAIL:", f)
    if tool.close() != 0:
        failures.append("httpresp_verdict failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
