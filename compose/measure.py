"""Figures for the compose stack, each against a baseline of the same run.

    .venv/bin/python compose/measure.py [--cold] [--cycles N] [--seconds S]

* ``--cold``: removes knell's images and the base image first, then times
  making the base image (debootstrap where no registry answers) and building
  each image from nothing.
* warm up / down of a stack (Postgres + Redis + Toxiproxy; Redis alone),
  over N cycles, images present.
* single-row INSERT transactions per second (pgbench, one client, fsync on)
  against the containerized Postgres, through its Toxiproxy link and direct,
  next to a private Postgres server started here from the same packages
  (the baseline): what the container and the proxy cost a store-bound run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knell.stores.compose import ComposeStack, ImageSpec
from knell.stores.compose import images as img
from knell.stores.compose.engine import client
from knell.stores.compose.files import compose_dir

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def cold(compose: Path, log: Path) -> dict[str, float]:
    engine = client(timeout=900)
    for image in engine.images.list():
        for tag in image.tags:
            if tag.startswith("knell/") or tag == img.BASE_IMAGE:
                engine.images.remove(tag, force=True)
    engine.images.prune(filters={"dangling": True})
    (compose / "wheelhouse" / ".stamp").unlink(missing_ok=True)
    out = {"base image": img.ensure_base(compose, log=log, say=print)}
    out["wheelhouse"] = img.ensure_wheelhouse(compose, log=log, say=print)
    specs = {**img.airgap_images(compose), "runner": img.runner_image(compose)}
    for name, seconds in img.build_images(specs, log=log, say=print).items():
        out[f"image {name}"] = seconds
    return out


def warm(
    services: tuple[str, ...], cycles: int, images: dict[str, ImageSpec]
) -> tuple[list[float], list[float]]:
    ups, downs = [], []
    for _ in range(cycles):
        stack = ComposeStack(services, images=images)
        start = time.monotonic()
        try:
            stack.up()
            ups.append(time.monotonic() - start)
        finally:
            start = time.monotonic()
            stack.down()
            downs.append(time.monotonic() - start)
    return ups, downs


def pgbench(host: str, port: int, seconds: int, env: dict[str, str]) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("INSERT INTO knell_bench(body) VALUES ('producer-1:1');\n")
    base = [str(PG_BIN / "psql"), "-h", host, "-p", str(port), "-U", "knell", "-d", "knell", "-q"]
    table = "CREATE TABLE IF NOT EXISTS knell_bench(id bigserial PRIMARY KEY, body text)"
    subprocess.run([*base, "-c", table], env=env, check=True)
    done = subprocess.run(
        [str(PG_BIN / "pgbench"), "-n", "-c", "1", "-T", str(seconds), "-f", script.name,
         "-h", host, "-p", str(port), "-U", "knell", "knell"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    os.unlink(script.name)
    match = re.search(r"tps = ([\d.]+)", done.stdout)
    assert match, done.stdout
    return float(match.group(1))


def private_postgres(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A private server like the stores provider's: initdb as postgres,
    started through the keeper so it dies with us."""
    shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    subprocess.run(
        ["runuser", "-u", "postgres", "--", str(PG_BIN / "initdb"), "-D", str(data),
         "-U", "knell", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"],
        check=True, capture_output=True,
    )  # fmt: skip
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "knell.platform.keeper", str(os.getpid()), "--user", "postgres",
         "--", str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(folder),
         "-c", "listen_addresses=127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        ready = subprocess.run(
            [str(PG_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
        )
        if ready.returncode == 0:
            break
        time.sleep(0.1)
    subprocess.run(
        [str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "knell", "-d",
         "postgres", "-q", "-c", "CREATE DATABASE knell"],
        check=True,
    )  # fmt: skip
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument(
        "--toxiproxy-dir",
        type=Path,
        help="build the toxiproxy service from this Dockerfile folder instead",
    )
    args = parser.parse_args()
    images: dict[str, ImageSpec] = {}
    if args.toxiproxy_dir:
        where = args.toxiproxy_dir.resolve()
        images["toxiproxy"] = ImageSpec("knell/toxiproxy-custom", where, "Dockerfile", (where,))
    compose = compose_dir()
    log = Path(tempfile.gettempdir()) / "knell-measure-build.log"
    if args.cold:
        start = time.monotonic()
        for name, seconds in cold(compose, log).items():
            print(f"cold {name:18} {seconds:6.1f} s")
        print(f"cold total              {time.monotonic() - start:6.1f} s")
    for services in (("postgres", "redis"), ("redis",)):
        ups, downs = warm(services, args.cycles, images)
        up, down = statistics.median(ups), statistics.median(downs)
        print(
            f"warm {'+'.join(services):15} up median {up:5.2f} s "
            f"(min {min(ups):.2f}, max {max(ups):.2f}); down median {down:5.2f} s (n={args.cycles})"
        )
    with ComposeStack(("postgres",), images=images) as stack, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PGPASSWORD": "knell"}
        linked = pgbench(*stack.address("postgres"), args.seconds, env)
        direct = pgbench(*stack.address("postgres", direct=True), args.seconds, env)
        server, port = private_postgres(Path(tmp))
        try:
            private = pgbench("127.0.0.1", port, args.seconds, env)
        finally:
            server.terminate()
            server.wait()
    print(f"INSERT tx/s private server (baseline) {private:8.0f}")
    print(f"INSERT tx/s container, direct         {direct:8.0f}  ratio {direct / private:.2f}")
    print(f"INSERT tx/s container, through link   {linked:8.0f}  ratio {linked / private:.2f}")


if __name__ == "__main__":
    main()
