"""What knell's fault proxy costs a link that has no fault on it.

Every store operation of a networked run goes through the proxy, nearly
always with no toxic, so its no-toxic cost is what a run pays. Two figures,
each next to the same measurement on a direct connection in the same run:

* **round trip**: p50 and p99 over many small (64-byte) request / reply
  pairs with an echo server, one connection each way, blocks of direct
  and proxied requests interleaved (see :mod:`.timing`);
* **bulk throughput**: a download of many megabytes, direct and through
  the proxy, interleaved, median MB/s; and the same through a ``noop``
  toxic, which sends the link down the toxic pipeline (the slow path) and
  so shows what a fault window's bookkeeping costs.

The echo / bulk server runs in its own process (``python -m
knell.bench.proxy serve PORTFILE``, leashed to the bench), the proxy in
its own (:func:`knell.nemesis.toxiproxy.start_local_proxy`), the client
here; the machine is the same for both sides of every ratio.

Toxiproxy's README promises "< 100 µs" of added latency with no toxics;
that is the goal of the round-trip rows.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from knell.bench.result import Row, ratio
from knell.stats import percentile

__all__ = ["run_proxy_bench"]

SECTION = "proxy"
PAYLOAD = 64
_CHUNK = bytes(1 << 20)


# -- the upstream: echo, or a bulk download on "BULK <n>\n" -----------------


class _Upstream(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.left = 0
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        if data.startswith(b"BULK "):
            self.left = int(data[5:].strip())
            self._pump()
        else:
            self.transport.write(data)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._pump()

    def _pump(self) -> None:
        assert self.transport is not None
        while self.left > 0 and not self.paused:
            size = min(self.left, len(_CHUNK))
            self.transport.write(_CHUNK[:size] if size < len(_CHUNK) else _CHUNK)
            self.left -= size


async def _serve(portfile: Path) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Upstream, "127.0.0.1", 0)
    tmp = portfile.with_suffix(".tmp")
    tmp.write_text(str(server.sockets[0].getsockname()[1]), encoding="utf-8")
    tmp.replace(portfile)
    await server.serve_forever()


def _start_upstream(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    portfile = work / "upstream.port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "knell.bench.proxy", "serve", str(portfile), str(os.getpid())],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if portfile.exists():
            return proc, int(portfile.read_text(encoding="utf-8"))
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    raise RuntimeError("proxy bench: the upstream server did not start")


# -- the client --------------------------------------------------------------


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _round_trips(sock: socket.socket, count: int, out: list[float]) -> int:
    payload = b"r" * PAYLOAD
    buf = bytearray(PAYLOAD)
    view = memoryview(buf)
    clock = time.perf_counter
    for _ in range(count):
        start = clock()
        sock.sendall(payload)
        got = 0
        while got < PAYLOAD:
            got += sock.recv_into(view[got:])
        out.append(clock() - start)
    return count


def _download(port: int, size: int) -> float:
    """Seconds to receive ``size`` bytes on a fresh connection."""
    buf = bytearray(1 << 20)
    with _connect(port) as sock:
        start = time.perf_counter()
        sock.sendall(b"BULK %d\n" % size)
        got = 0
        while got < size:
            n = sock.recv_into(buf)
            if n == 0:
                raise RuntimeError(f"bulk download ended after {got} of {size} bytes")
            got += n
        return time.perf_counter() - start


def _paired_downloads(
    direct: int, proxied: int, size: int, rounds: int
) -> tuple[list[float], list[float]]:
    base: list[float] = []
    subject: list[float] = []
    for index in range(rounds):
        pair = [(direct, base), (proxied, subject)]
        for port, out in pair if index % 2 == 0 else reversed(pair):
            out.append(size / _download(port, size) / 1e6)
    return base, subject


def run_proxy_bench(
    work: Path, *, short: bool = False, say: Callable[[str], None] = lambda _: None
) -> list[Row]:
    """Round trip and throughput through knell's proxy, next to direct."""
    from knell.nemesis.toxiproxy import ToxicSpec, ToxiproxyClient, start_local_proxy

    work.mkdir(parents=True, exist_ok=True)
    requests = 2_000 if short else 10_000
    blocks = 10
    size = (16 if short else 64) << 20
    rounds = 3 if short else 5
    upstream, port = _start_upstream(work)
    server = start_local_proxy()
    try:
        client = ToxiproxyClient(server.api_url, prefix="bench-")
        plain = client.create_proxy("plain", f"127.0.0.1:{port}")
        piped = client.create_proxy("piped", f"127.0.0.1:{port}")
        client.apply_toxic("piped", ToxicSpec("noop", "downstream", name="noop"))
        proxied = int(plain.listen.rsplit(":", 1)[1])
        pipeline = int(piped.listen.rsplit(":", 1)[1])

        direct_rtt: list[float] = []
        proxy_rtt: list[float] = []
        with _connect(port) as d, _connect(proxied) as p:
            _round_trips(d, 200, [])  # warm both paths up
            _round_trips(p, 200, [])
            per_block = requests // blocks
            for index in range(blocks):
                pair = [(d, direct_rtt), (p, proxy_rtt)]
                for sock, out in pair if index % 2 == 0 else reversed(pair):
                    _round_trips(sock, per_block, out)
        say(f"proxy: {len(proxy_rtt)} round trips each way")
        proxy_proc = psutil.Process(server.pid)
        cpu = _cpu(proxy_proc)
        base_bulk, proxy_bulk = _paired_downloads(port, proxied, size, rounds)
        fast_cpu = _cpu(proxy_proc) - cpu
        _, pipe_bulk = _paired_downloads(port, pipeline, size, rounds)
        pipe_cpu = _cpu(proxy_proc) - cpu - fast_cpu
        say("proxy: bulk done")
    finally:
        server.stop()
        upstream.kill()
        upstream.wait()

    rows: list[Row] = []
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        direct_v = percentile(direct_rtt, q)
        proxy_v = percentile(proxy_rtt, q)
        assert direct_v is not None and proxy_v is not None
        added_us = (proxy_v - direct_v) * 1e6
        rows.append(
            Row(
                SECTION,
                f"round trip {label} via knell proxy (64 B, no toxic)",
                proxy_v * 1e6,
                "µs",
                direct_v * 1e6,
                f"direct round trip {label}, same run",
                ratio(proxy_v, direct_v),
                goal="adds < 100 µs (Toxiproxy's README figure)",
                met=added_us < 100,
                note=f"adds {added_us:.0f} µs",
                extra={"added_us": added_us, "requests": len(proxy_rtt)},
            )
        )
    gigabytes = size * rounds / 1e9
    for name, values, note, cpu_s in (
        ("bulk download via knell proxy (no toxic)", proxy_bulk, "fast path", fast_cpu),
        ("bulk download via knell proxy (noop toxic)", pipe_bulk, "toxic pipeline", pipe_cpu),
    ):
        subject = statistics.median(values)
        base = statistics.median(base_bulk)
        rows.append(
            Row(
                SECTION,
                name,
                subject,
                "MB/s",
                base,
                "direct download, same run",
                ratio(subject, base),
                note=f"{note}; {size >> 20} MiB x {rounds}; proxy CPU {cpu_s / gigabytes:.2f} s/GB",
                extra={
                    "runs": values,
                    "baseline_runs": base_bulk,
                    "proxy_cpu_s_per_gb": cpu_s / gigabytes,
                },
            )
        )
    return rows


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "serve":
        from knell.platform import die_with_parent

        die_with_parent(int(argv[2]))
        asyncio.run(_serve(Path(argv[1])))
        return 0
    print("usage: python -m knell.bench.proxy serve PORTFILE PARENT_PID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
