"""What the machine has for the compose stack, as findings for ``knell doctor``.

Each :class:`Finding` names one thing (the docker SDK, the engine, compose,
the base image, each image of both image sets), whether it is there
(``ok``), what was found (``detail``) and, when it is missing, how to get it
(``hint``). An image counts as *buildable* when its base image is present,
or can be made here (debootstrap installed, running as root): that is what
decides whether ``make compose-test`` can run on this machine.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from knell.stores.compose import images as img
from knell.stores.compose.command import ComposeCommand
from knell.stores.compose.errors import ComposeError

__all__ = ["Finding", "doctor"]


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def doctor(compose: Path | None = None) -> list[Finding]:
    """Check the Docker engine, compose and the stack's images."""
    findings: list[Finding] = []
    try:
        import docker

        findings.append(Finding("docker SDK", True, f"docker {docker.__version__}"))
    except ImportError:
        return [Finding("docker SDK", False, "not installed", "pip install 'knell[compose]'")]

    from knell.stores.compose.engine import HOW, client

    try:
        engine = client(timeout=10)
        engine_at = os.environ.get("DOCKER_HOST", "local socket")
        version = engine.version()
        info = engine.info()
        findings.append(
            Finding(
                "docker engine",
                True,
                f"{version.get('Version')} (API {version.get('ApiVersion')}, "
                f"{info.get('Driver')} storage, at {engine_at})",
            )
        )
    except ComposeError as exc:
        reason = " ".join(str(exc).replace(HOW, "").split()).rstrip(": ")
        findings.append(Finding("docker engine", False, reason[:200], HOW))
        engine = None

    try:
        command = ComposeCommand.detect()
        findings.append(Finding("compose", True, command.label))
    except ComposeError as exc:
        findings.append(Finding("compose", False, str(exc), "apt-get install -y docker-compose"))

    if engine is None:
        return findings
    try:
        from knell.stores.compose.files import compose_dir

        where = compose_dir(compose)
    except ComposeError as exc:
        findings.append(Finding("compose files", False, str(exc), "set KNELL_COMPOSE_DIR"))
        return findings
    findings.append(Finding("compose files", True, str(where)))

    base = img.image_present(img.BASE_IMAGE, engine)
    makeable = img.debootstrap_available() and _root()
    findings.append(
        Finding(
            f"base image {img.BASE_IMAGE}",
            base or makeable,
            "present" if base else ("can be made (debootstrap)" if makeable else "missing"),
            ""
            if base or makeable
            else "apt-get install -y debootstrap (as root), or docker pull debian:bookworm-slim",
        )
    )
    for service, tag in img.OFFICIAL.items():
        present = img.image_present(tag, engine)
        state = "present" if present else "not present (compose pulls it if a registry answers)"
        findings.append(Finding(f"official image {service}", True, f"{tag}: {state}"))
    specs = {**img.airgap_images(where), "runner": img.runner_image(where)}
    for service, spec in specs.items():
        tag = spec.tag
        present = img.image_present(tag, engine)
        state = "present" if present else ("buildable" if base or makeable else "not buildable")
        findings.append(
            Finding(
                f"built image {service}",
                present or base or makeable,
                f"{tag}: {state}",
                "" if present else "knell compose build",
            )
        )
    return findings


def _root() -> bool:
    getuid = getattr(os, "getuid", None)
    return shutil.which("debootstrap") is not None and (getuid is None or getuid() == 0)
