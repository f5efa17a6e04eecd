"""Bring your own server: a run on a Postgres or Redis someone else runs.

``store_url = "postgresql://..."`` or ``"redis://..."`` points a run at an
existing server (a CI service container, a staging database). knell gives
each run its own namespace there, so runs never see each other's
messages: a fresh schema ``knell_<id>`` (Postgres) or key prefix
``knell:<id>:`` (Redis), dropped when the run ends unless ``keep`` is set.
A URL that already names one (``?schema=...`` / ``?prefix=...``) is used
as it is and never dropped: it belongs to the user.

knell cannot SIGKILL a server it did not start, so store faults on such a
server need the user's own commands: ``crash_command`` (say, ``docker kill
-s KILL pg``) and ``restart_command`` (``docker start pg``), run with the
shell. Without them a crash is refused with a :class:`StoreError`; a
pause is always refused.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from knell.buses._netopts import redact, split_url
from knell.owners import Owner
from knell.stores.base import Store, StoreError, tail

if TYPE_CHECKING:
    from knell.stores.kind import StoreKind

__all__ = ["ExternalStore"]

_CREDENTIALS = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "does not exist",  # role "x" does not exist / database "y" does not exist
    "wrongpass",
    "noauth",
    "invalid username-password",
    "invalid password",
)


class ExternalStore(Store):
    """A namespace on a server knell did not start."""

    def __init__(
        self,
        run_dir: Path,
        url: str,
        *,
        owner: Owner | None = None,
        keep: bool = False,
        crash_command: str | None = None,
        restart_command: str | None = None,
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
    ) -> None:
        super().__init__(run_dir, poll_interval=poll_interval, op_timeout=op_timeout)
        from knell.stores import registry

        scheme = urlsplit(url).scheme
        found = registry.by_scheme(scheme)
        if found is None or "existing" not in found.provisions:
            expected = " or ".join(
                f"{k.schemes[0]}://"
                for k in registry.kinds().values()
                if "existing" in k.provisions
            )
            raise StoreError(f"store_url {redact(url)}: expected a {expected} URL")
        found.require()
        self.store_kind: StoreKind = found
        self.kind = found.name
        key, pattern = found.namespace_key, found.namespace_pattern()
        try:
            self._client_url, options = split_url(
                url, namespace_key=key, namespace_check=pattern, schemes=(scheme,)
            )
        except ValueError as exc:
            raise StoreError(f"store_url: {exc}") from None
        self._given = url
        self._namespace_key = key
        run = uuid.uuid4().hex[:10]
        self.owned = options.namespace is None
        if options.namespace is not None:
            self.namespace = options.namespace
        else:
            self.namespace = found.fresh_namespace(run)
        if "poll_interval" in dict(parse_qsl(urlsplit(url).query)):
            self.poll_interval = options.poll_interval
        if "op_timeout" in dict(parse_qsl(urlsplit(url).query)):
            self.op_timeout = options.op_timeout
        self.owner = owner
        self.keep = keep
        self.crash_command = crash_command
        self.restart_command = restart_command
        self.faults = frozenset({"crash"} if crash_command and restart_command else ())
        self.frozen_client_stalls = found.frozen_client_stalls
        self.log = self.store_dir / "external.log"
        self._started = False

    @property
    def url(self) -> str:
        parts = urlsplit(self._client_url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        query += [
            (self._namespace_key, self.namespace),
            ("poll_interval", f"{self.poll_interval:g}"),
            ("op_timeout", f"{self.op_timeout:g}"),
        ]
        return urlunsplit(parts._replace(query=urlencode(query)))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "external",
            "url": redact(self._client_url),
            "namespace": self.namespace,
            "kept": self.keep or not self.owned,
        }

    def describe_short(self) -> str:
        return f"external {self.kind} at {redact(self._client_url)}"

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._check(create=True)

    def _connect_error(self, exc: BaseException) -> StoreError:
        message = " ".join(str(exc).split()) or type(exc).__name__
        where = f"store_url {redact(self._given)}"
        if (
            any(marker in message.lower() for marker in _CREDENTIALS)
            or "Authentication" in type(exc).__name__
        ):
            return StoreError(f"{where}: the server refused the credentials: {message}")
        return StoreError(f"{where} is unreachable: {message}")

    def _check(self, *, create: bool) -> None:
        """Connect once (and create the run's namespace); :class:`StoreError`
        says whether the server is unreachable or refused us."""
        try:
            self.store_kind.connect(
                self._client_url, self.namespace, create=create, timeout=self.op_timeout
            )
        except StoreError as exc:
            raise StoreError(f"store_url {redact(self._given)}: {exc}") from None
        except Exception as exc:  # the client library's own errors, and OSError
            raise self._connect_error(exc) from None

    def wait_ready(self, timeout: float = 30.0) -> float:
        started = time.monotonic()
        while True:
            try:
                self._check(create=False)
                return time.monotonic() - started
            except StoreError as exc:
                if time.monotonic() - started >= timeout:
                    raise StoreError(f"{exc} (still, after {timeout:g} s)") from None
            time.sleep(0.1)

    def _run_command(self, what: str, command: str | None) -> None:
        if not command:
            raise StoreError(
                f"store-crash on an external {self.kind} server needs crash_command and "
                "restart_command (knell cannot kill a server it did not start)"
            )
        self.store_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"$ {command}\n")
            log.flush()
            try:
                done = subprocess.run(
                    command, shell=True, stdout=log, stderr=subprocess.STDOUT, timeout=120
                )
            except subprocess.TimeoutExpired:
                raise StoreError(f"{what} {command!r} did not finish within 120 s") from None
        if done.returncode != 0:
            raise StoreError(
                f"{what} {command!r} failed (exit {done.returncode}): {tail(self.log, 4)}"
            )

    def crash(self) -> None:
        self._run_command("crash_command", self.crash_command)

    def restart(self) -> None:
        self._run_command("restart_command", self.restart_command)

    def pause(self) -> None:
        raise StoreError(
            f"store-pause needs a private server: knell cannot pause the external {self.kind} "
            f"server at {redact(self._client_url)}"
        )

    def resume(self) -> None:
        self.pause()

    def stop(self) -> None:
        if not self._started or self.keep or not self.owned:
            return
        try:
            self.store_kind.drop(self._client_url, self.namespace, timeout=self.op_timeout)
        except Exception as exc:  # the server may be down at the end: say so, never raise
            self.store_dir.mkdir(parents=True, exist_ok=True)
            with open(self.log, "a", encoding="utf-8") as log:
                log.write(f"could not drop namespace {self.namespace!r}: {exc}\n")

    @property
    def logs(self) -> list[Path]:
        return [self.log] if self.log.exists() else []
