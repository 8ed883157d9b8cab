#!/usr/bin/env python3
"""A TLS-terminating TCP proxy in front of a plain-HTTP `sbx serve`, as an ingress or a
reverse proxy would be in a deployment: TLS from the client, plain TCP to the server, bytes
relayed both ways untouched (WebSocket upgrades included).

    tls_proxy.py CERT KEY BACKEND_PORT PORT_FILE

It listens on a free loopback port, writes that port to PORT_FILE, and runs until killed.
"""
import asyncio
import os
import socket
import ssl
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, ssl.SSLError):
            pass


async def serve(cert: str, key: str, backend: int, port_file: str) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    async def on_client(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            br, bw = await asyncio.open_connection("127.0.0.1", backend)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, bw), pipe(br, cw))

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(on_client, sock=sock, ssl=ctx)
    with open(port_file + ".tmp", "w", encoding="ascii") as f:
        f.write(str(sock.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    async with server:
        await server.serve_forever()


def main() -> None:
    cert, key, backend, port_file = sys.argv[1:5]
    asyncio.run(serve(cert, key, int(backend), port_file))


if __name__ == "__main__":
    main()
