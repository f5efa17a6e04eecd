"""TEST STAND-IN for the compose tests, not knell's proxy (see Dockerfile).

A TCP forwarder with the smallest slice of the Toxiproxy HTTP API: GET
/version, GET /proxies, POST /proxies {name, listen, upstream, enabled},
GET|DELETE /proxies/NAME, POST /proxies/NAME {enabled}. No toxics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys

PROXIES: dict[str, dict[str, object]] = {}
SERVERS: dict[str, asyncio.base_events.Server] = {}
LINKS: dict[str, set[asyncio.StreamWriter]] = {}


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


async def start(name: str) -> None:
    proxy = PROXIES[name]
    host, _, port = str(proxy["listen"]).rpartition(":")
    up_host, _, up_port = str(proxy["upstream"]).rpartition(":")

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(up_host, int(up_port))
        except OSError:
            writer.close()
            return
        LINKS.setdefault(name, set()).update({writer, up_writer})
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    SERVERS[name] = await asyncio.start_server(accept, host or "0.0.0.0", int(port))


async def stop(name: str) -> None:
    server = SERVERS.pop(name, None)
    if server is not None:
        server.close()
    for writer in LINKS.pop(name, set()):
        writer.close()


async def api(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    method, path, _ = head.split("\r\n")[0].split(" ", 2)
    length = 0
    for line in head.split("\r\n")[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    body = json.loads(await reader.readexactly(length)) if length else {}
    status, reply = 404, {"error": "not found"}
    parts = path.strip("/").split("/")
    if path == "/version":
        status, reply = 200, "standin"
    elif parts == ["proxies"] and method == "GET":
        status, reply = 200, PROXIES
    elif parts == ["proxies"] and method == "POST":
        name = body["name"]
        if name in PROXIES:
            status, reply = 409, {"error": "proxy already exists"}
        else:
            PROXIES[name] = {
                "name": name,
                "listen": body["listen"],
                "upstream": body["upstream"],
                "enabled": body.get("enabled", True),
                "toxics": [],
            }
            if PROXIES[name]["enabled"]:
                await start(name)
            status, reply = 201, PROXIES[name]
    elif len(parts) == 2 and parts[0] == "proxies" and parts[1] in PROXIES:
        name = parts[1]
        if method == "GET":
            status, reply = 200, PROXIES[name]
        elif method == "DELETE":
            await stop(name)
            del PROXIES[name]
            status, reply = 204, None
        elif method == "POST":
            enabled = bool(body.get("enabled", PROXIES[name]["enabled"]))
            if enabled and not PROXIES[name]["enabled"]:
                await start(name)
            elif not enabled and PROXIES[name]["enabled"]:
                await stop(name)
            PROXIES[name]["enabled"] = enabled
            status, reply = 200, PROXIES[name]
    data = b"" if reply is None else json.dumps(reply).encode()
    writer.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()
    writer.close()


async def main(listen: str) -> None:
    host, _, port = listen.rpartition(":")
    server = await asyncio.start_server(api, host, int(port))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "0.0.0.0:8474"))
