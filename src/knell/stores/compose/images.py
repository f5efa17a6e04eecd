"""The images of the stack: which ones a run needs, and building them.

Two image sets serve the same compose file. Where a registry answers, the
official images (``postgres``, ``redis``, ``ghcr.io/shopify/toxiproxy``) are
pulled by compose. Where none does (air-gapped CI, the machine kind knell is
built on), ``docker-compose.airgap.yml`` swaps in images built here ``FROM
debian:bookworm-slim``, which :func:`ensure_base` makes with debootstrap when
it is missing (``compose/build-base.sh``).

Images are built through the Docker API (classic builder), so neither
compose's builder nor BuildKit is needed, and each built image is tagged
with a hash of what went into it: a changed Dockerfile or a changed knell
source gives a new tag, so a run never uses a stale proxy or runner, and an
unchanged one is reused at no cost. Older tags of the same image are
removed after a build.

The images built from knell's source install its dependencies from
``compose/wheelhouse/``, which :func:`ensure_wheelhouse` fills on the host
with ``pip download`` for the image's Python (CPython 3.11, bookworm's):
the build then needs no package index, and the host's pip settings (a
mirror, a proxy) are the only ones that matter.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knell.stores.compose.engine import client
from knell.stores.compose.errors import StackFailed

if TYPE_CHECKING:
    from docker import DockerClient

    from knell.stores.kind import ComposeService

__all__ = [
    "BASE_IMAGE",
    "ENV_VARS",
    "OFFICIAL",
    "ImageSpec",
    "airgap_images",
    "build_images",
    "debootstrap_available",
    "ensure_base",
    "ensure_wheelhouse",
    "image_present",
    "pull",
    "runner_image",
]

BASE_IMAGE = "debian:bookworm-slim"


def _services() -> dict[str, ComposeService]:
    from knell.stores import registry

    return {k.name: k.compose for k in registry.kinds().values() if k.compose is not None}


OFFICIAL: dict[str, str] = {
    **{name: service.official_image for name, service in _services().items()},
    "toxiproxy": "ghcr.io/shopify/toxiproxy:2.9.0",
}
"""What ``docker-compose.yml`` runs unless told otherwise (a store's
image is its kind's to declare)."""
ENV_VARS: dict[str, str] = {
    **{name: service.image_variable for name, service in _services().items()},
    "toxiproxy": "KNELL_TOXIPROXY_IMAGE",
    "runner": "KNELL_RUNNER_IMAGE",
}
"""The variable through which the compose files take each service's image."""
IMAGE_PYTHON = "3.11.2"
"""The Python of debian:bookworm-slim's python3, which the wheelhouse
targets. The full version, not just 3.11: dependencies carry markers on
it (redis-py needs async-timeout below 3.11.3), and pip evaluates them
against what it is told."""
IMAGE_LABEL = "knell.image"

Say = Callable[[str], None]


@dataclass(frozen=True)
class ImageSpec:
    """How to build one image: ``docker build -f DOCKERFILE CONTEXT``."""

    repository: str
    """``knell/postgres``; the tag is a hash of the inputs."""
    context: Path
    dockerfile: str
    """Relative to ``context``."""
    inputs: tuple[Path, ...]
    """Files and folders whose content makes the tag."""

    @property
    def tag(self) -> str:
        digest = hashlib.sha256()
        digest.update(self.dockerfile.encode())
        for path in _files(self.inputs):
            digest.update(str(path.relative_to(self.context)).encode())
            digest.update(path.read_bytes())
        return f"{self.repository}:{digest.hexdigest()[:12]}"


def _files(inputs: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for item in inputs:
        if item.is_dir():
            found += [p for p in item.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        elif item.is_file():
            found.append(item)
    return sorted(found)


def _source_inputs(repo: Path) -> tuple[Path, ...]:
    return (
        repo / "pyproject.toml",
        repo / "README.md",
        repo / "LICENSE",
        repo / "src",
        repo / "compose" / "wheelhouse" / ".stamp",
    )


def airgap_images(compose: Path) -> dict[str, ImageSpec]:
    """The images ``docker-compose.airgap.yml`` runs, by service."""
    repo = compose.parent
    images = compose / "images"
    stores = {
        name: ImageSpec(f"knell/{name}", images / name, "Dockerfile", (images / name,))
        for name in _services()
    }
    return {
        **stores,
        "toxiproxy": ImageSpec(
            "knell/toxiproxy",
            repo,
            "compose/images/toxiproxy/Dockerfile",
            (images / "toxiproxy", *_source_inputs(repo)),
        ),
    }


def runner_image(compose: Path) -> ImageSpec:
    """The ``runner`` service's image: knell installed, with the scenarios."""
    repo = compose.parent
    return ImageSpec(
        "knell/runner",
        repo,
        "compose/images/runner/Dockerfile",
        (compose / "images" / "runner", repo / "scenarios", *_source_inputs(repo)),
    )


def image_present(tag: str, engine: DockerClient | None = None) -> bool:
    from docker.errors import ImageNotFound

    try:
        (engine or client()).images.get(tag)
    except ImageNotFound:
        return False
    return True


def pull(tag: str, *, timeout: int = 120) -> bool:
    """Try to pull an image; False when no registry gives it."""
    from docker.errors import DockerException

    repository, _, version = tag.rpartition(":")
    try:
        client(timeout).images.pull(repository, tag=version)
    except DockerException:
        return False
    return True


def ensure_base(compose: Path, *, log: Path, say: Say = lambda _: None) -> float:
    """Make :data:`BASE_IMAGE` when it is missing (pull, else debootstrap +
    ``docker import``: ``compose/build-base.sh``); return the seconds spent."""
    if image_present(BASE_IMAGE):
        return 0.0
    say(f"making the base image {BASE_IMAGE} (pull, else debootstrap: about 40 s)")
    start = time.monotonic()
    _run([str(compose / "build-base.sh")], log, what=f"making {BASE_IMAGE}")
    return time.monotonic() - start


def _requirements(repo: Path) -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    deps: list[str] = list(project["project"]["dependencies"])
    deps += list(project["build-system"]["requires"])
    return deps + list(_IMAGE_ONLY)


_IMAGE_ONLY = ("async-timeout>=4.0.3",)
"""Dependencies only the image's Python needs: ``pip download`` evaluates
markers such as redis-py's ``python_full_version < "3.11.3"`` against the
host's Python, whatever ``--python-version`` says, so what bookworm's 3.11.2
needs and a newer host does not is named here."""


def ensure_wheelhouse(compose: Path, *, log: Path, say: Say = lambda _: None) -> float:
    """Download knell's dependencies (and its build backend) as wheels for
    the images' Python into ``compose/wheelhouse/``, unless the wheels for
    today's ``pyproject.toml`` are already there; return the seconds spent."""
    repo = compose.parent
    house = compose / "wheelhouse"
    requirements = _requirements(repo)
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    stamp_text = "\n".join([IMAGE_PYTHON, machine, *requirements]) + "\n"
    stamp = house / ".stamp"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == stamp_text:
        return 0.0
    say(f"downloading wheels for the images (CPython {IMAGE_PYTHON}, {machine})")
    start = time.monotonic()
    house.mkdir(parents=True, exist_ok=True)
    for old in [*house.glob("*.whl"), *house.glob("*.tar.gz")]:
        old.unlink()
    platforms: list[str] = []
    for minor in range(36, 16, -1):  # bookworm's glibc is 2.36
        platforms += ["--platform", f"manylinux_2_{minor}_{machine}"]
    platforms += ["--platform", f"manylinux2014_{machine}"]
    if machine == "x86_64":
        platforms += ["--platform", "manylinux2010_x86_64", "--platform", "manylinux1_x86_64"]
    abi = "cp" + "".join(IMAGE_PYTHON.split(".")[:2])
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--dest", str(house), "--only-binary=:all:", *platforms,
        "--python-version", IMAGE_PYTHON, "--implementation", "cp",
        "--abi", abi, "--abi", "abi3", "--abi", "none",
        *requirements,
    ]  # fmt: skip
    _run(command, log, what="downloading wheels for the images")
    stamp.write_text(stamp_text, encoding="utf-8")
    return time.monotonic() - start


def _run(command: list[str], log: Path, *, what: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(command)}\n")
        fh.flush()
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        raise StackFailed(f"{what} failed (exit {done.returncode}):\n{_tail(log)}")


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(encoding="utf-8").splitlines()[-lines:])
    except OSError:
        return ""


def build_images(
    specs: Mapping[str, ImageSpec],
    *,
    log: Path,
    force: bool = False,
    say: Say = lambda _: None,
) -> dict[str, float]:
    """Build every image that is missing (all with ``force``); return the
    seconds each build took, by service (0 for one that was present)."""
    engine = client(timeout=900)
    timings: dict[str, float] = {}
    for service, spec in specs.items():
        tag = spec.tag
        if not force and image_present(tag, engine):
            timings[service] = 0.0
            continue
        say(f"building {tag} ({spec.context / spec.dockerfile})")
        start = time.monotonic()
        _build(engine, spec, tag, log)
        timings[service] = time.monotonic() - start
        _prune_other_tags(engine, spec.repository, keep=tag)
    return timings


def _build(engine: DockerClient, spec: ImageSpec, tag: str, log: Path) -> None:
    from docker.errors import DockerException

    log.parent.mkdir(parents=True, exist_ok=True)
    error: str | None = None
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ docker build -t {tag} -f {spec.dockerfile} {spec.context}\n")
        try:
            stream: Iterable[dict[str, Any]] = engine.api.build(
                path=str(spec.context),
                dockerfile=spec.dockerfile,
                tag=tag,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                labels={IMAGE_LABEL: "1"},
            )
            for chunk in stream:
                if "stream" in chunk:
                    fh.write(str(chunk["stream"]))
                elif "error" in chunk:
                    error = str(chunk["error"]).strip()
                    fh.write(f"ERROR: {error}\n")
        except DockerException as exc:
            error = str(exc)
            fh.write(f"ERROR: {error}\n")
    if error is not None:
        hint = ""
        if "debian:bookworm-slim" in error or "pull access denied" in error:
            hint = "\n(make the base image first: compose/build-base.sh)"
        raise StackFailed(f"building {tag} failed: {error}\n{_tail(log)}{hint}")


def _prune_other_tags(engine: DockerClient, repository: str, *, keep: str) -> None:
    """Remove earlier builds of the same image; one still used by a
    container stays (removal fails, quietly)."""
    from docker.errors import DockerException

    for image in engine.images.list(name=repository):
        if keep in image.tags:
            continue
        for tag in image.tags:
            if tag.startswith(repository + ":"):
                with contextlib.suppress(DockerException):
                    engine.images.remove(tag, noprune=False)


def debootstrap_available() -> bool:
    """Whether :data:`BASE_IMAGE` can be made here without a registry."""
    return shutil.which("debootstrap") is not None
