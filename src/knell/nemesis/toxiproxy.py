"""The one adapter knell uses to drive a Toxiproxy server (real or knell's own).

The client is ``toxiproxy-python`` (import ``toxiproxy``). It is still worth
using: it is the Python client Toxiproxy's README lists, its ``Proxy`` and
``Toxic`` objects and its status-to-exception mapping are the vocabulary a
Toxiproxy user already knows, and driving knell's own server through a
client knell did not write keeps that server honest about compatibility.
But four of its habits must not leak into the rest of knell, and this module
fixes each:

* **One API address for the whole process.** The package keeps host and
  port as class attributes of ``APIConsumer``, shared by every thread, so
  two runs (or a run and its test) against two servers would talk to
  whichever set it last. Here, the consumer the package calls is replaced,
  once, by :class:`_Consumer`, which takes the address from a context
  variable that each :class:`ToxiproxyClient` call sets for its own thread
  (or task) only.
* **No timeouts.** Its ``requests`` calls wait forever, and Toxiproxy's own
  users report admin calls that hang (a toxic removed under traffic). Every
  call here has a timeout (:attr:`ToxiproxyClient.timeout`, or ``timeout=``
  per call) and raises :class:`AdminTimeout`; :meth:`ToxiproxyClient.recreate`
  replaces a stuck proxy with a fresh one on the same address.
* **Missing calls.** It cannot update a proxy's ``listen`` / ``upstream``
  or a toxic, and its ``populate`` is a client-side loop of deletes and
  creates that never calls ``POST /populate`` (so it drops the toxics of a
  proxy it need not touch). Those three are knell's own HTTP calls, made
  through the same consumer (same address, timeout and errors).
* **Errors.** It raises for 400, 404 and 409 only, and turns a 500 (a
  listen address in use) into a ``KeyError`` deep inside. Here every non-2xx
  answer is a :class:`ApiRefused` naming the call, the status and the
  server's message.

**Names.** Proxies of parallel runs share a server, so a client has a
``prefix`` (:func:`unique_prefix`: pid and a random tag) put in front of
every proxy and toxic name it creates, and its listings show only its own
proxies, under their short names. :meth:`ToxiproxyClient.delete_all` and
:meth:`ToxiproxyClient.reset` touch only those.

**Which server.** :func:`find_server`: ``TOXIPROXY_URL`` if set, else a
``toxiproxy-server`` on PATH (started on loopback under the keeper leash),
else knell's own (:func:`start_local_proxy`).

Fault windows are proven on real connections by :mod:`knell.nemesis.probe`;
:meth:`ToxiproxyClient.prove` and :meth:`ToxiproxyClient.heal` tie the two
together.
"""

from __future__ import annotations

import contextvars
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import requests
import toxiproxy.proxy as _tp_proxy
import toxiproxy.server as _tp_server
from toxiproxy import Proxy as _TpProxy
from toxiproxy import Toxiproxy as _TpServer
from toxiproxy.api import APIConsumer as _TpConsumer
from toxiproxy.exceptions import ProxyExists as _TpProxyExists

from knell.nemesis.probe import (
    EXCHANGES,
    Evidence,
    Exchange,
    LinkDown,
    Proof,
    prove,
    wait_carries_traffic,
)
from knell.platform import contain

__all__ = [
    "AdminTimeout",
    "AlreadyExists",
    "ApiRefused",
    "BadRequest",
    "HealReport",
    "LinkDown",
    "LocalProxy",
    "NotFound",
    "ProxyInfo",
    "ProxySpec",
    "ServerHandle",
    "ToxicInfo",
    "ToxicSpec",
    "ToxiproxyClient",
    "ToxiproxyError",
    "Unreachable",
    "find_server",
    "start_local_proxy",
    "unique_prefix",
]

DEFAULT_TIMEOUT = 5.0
Stream = Literal["upstream", "downstream"]


# -- errors --------------------------------------------------------------------
#
#   ToxiproxyError            an admin call failed (.call names it)
#    +-- AdminTimeout         no answer in time: the server or the proxy may be stuck
#    +-- Unreachable          no connection to the API at all
#    +-- ApiRefused           the server answered an error (.status, .message)
#         +-- BadRequest      400: a bad toxic, bad JSON
#         +-- NotFound        404: no such proxy or toxic
#         +-- AlreadyExists   409: the name is taken


class ToxiproxyError(Exception):
    """An admin call to the Toxiproxy API failed."""

    def __init__(self, call: str, message: str) -> None:
        super().__init__(f"{call}: {message}")
        self.call = call
        self.message = message


class AdminTimeout(ToxiproxyError):
    """The API did not answer within the timeout."""


class Unreachable(ToxiproxyError):
    """The API could not be reached."""


class ApiRefused(ToxiproxyError):
    """The API answered with an error status."""

    def __init__(self, call: str, status: int, message: str) -> None:
        super().__init__(call, f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class BadRequest(ApiRefused):
    pass


class NotFound(ApiRefused):
    pass


class AlreadyExists(ApiRefused):
    pass


_BY_STATUS: dict[int, type[ApiRefused]] = {400: BadRequest, 404: NotFound, 409: AlreadyExists}


# -- the consumer the package calls ------------------------------------------------


@dataclass(frozen=True)
class _Target:
    base: str
    timeout: float
    session: requests.Session


_TARGET: contextvars.ContextVar[_Target | None] = contextvars.ContextVar(
    "knell_toxiproxy_target", default=None
)


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return str(body["error"])
    except ValueError:
        pass
    return response.text.strip() or response.reason or "no message"


class _Consumer(_TpConsumer):  # type: ignore[misc]
    """``APIConsumer`` with the address, timeout and session of the calling
    context, and an error for every non-2xx answer. Outside a
    :class:`ToxiproxyClient` call it is the package's own consumer,
    unchanged, so other code in the process that uses the package directly
    (with ``update_api_consumer``) keeps working."""

    @classmethod
    def _call(cls, method: str, url: str, **kwargs: Any) -> requests.Response:
        target = _TARGET.get()
        if target is None:
            raise RuntimeError("toxiproxy-python called outside a ToxiproxyClient call")
        call = f"{method} {url}"
        try:
            response = target.session.request(
                method, target.base + url, timeout=target.timeout, **kwargs
            )
        except requests.Timeout:
            raise AdminTimeout(call, f"no answer within {target.timeout:g} s") from None
        except requests.ConnectionError as exc:
            raise Unreachable(call, f"cannot reach {target.base}: {exc}") from None
        if response.status_code >= 400:
            kind = _BY_STATUS.get(response.status_code, ApiRefused)
            raise kind(call, response.status_code, _message(response))
        return response

    @classmethod
    def get(cls, url: str, params: Any = None, **kwargs: Any) -> requests.Response:
        if _TARGET.get() is None:
            return super().get(url, params=params, **kwargs)  # type: ignore[no-any-return]
        return cls._call("GET", url, params=params, **kwargs)

    @classmethod
    def post(cls, url: str, data: Any = None, json: Any = None, **kwargs: Any) -> requests.Response:
        if _TARGET.get() is None:
            return super().post(url, data=data, json=json, **kwargs)  # type: ignore[no-any-return]
        return cls._call("POST", url, data=data, json=json, **kwargs)

    @classmethod
    def delete(cls, url: str, **kwargs: Any) -> requests.Response:
        if _TARGET.get() is None:
            return super().delete(url, **kwargs)  # type: ignore[no-any-return]
        return cls._call("DELETE", url, **kwargs)


# The package looks ``APIConsumer`` up in these two modules at call time.
_tp_proxy.APIConsumer = _Consumer
_tp_server.APIConsumer = _Consumer


# -- what knell passes and gets back ------------------------------------------------


@dataclass(frozen=True)
class ToxicSpec:
    """A toxic to add: Toxiproxy's fields (``attributes`` in ms, KB/s,
    bytes, as Toxiproxy documents them per ``type``)."""

    type: str
    stream: Stream = "downstream"
    attributes: dict[str, int] = field(default_factory=dict)
    toxicity: float = 1.0
    name: str | None = None  # default: <type>_<stream>

    def __post_init__(self) -> None:
        if self.stream not in ("upstream", "downstream"):
            raise ValueError(f"toxic stream must be upstream or downstream, got {self.stream!r}")
        if not 0.0 <= self.toxicity <= 1.0:
            raise ValueError(f"toxicity must be between 0 and 1, got {self.toxicity}")
        for key, value in self.attributes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"toxic attribute {key} must be an integer >= 0, got {value!r}")

    @property
    def local_name(self) -> str:
        return self.name or f"{self.type}_{self.stream}"


@dataclass(frozen=True)
class ToxicInfo:
    """A toxic as the server reports it (``name`` without the prefix)."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, int]


@dataclass(frozen=True)
class ProxySpec:
    """A proxy to create or populate (``name`` without the prefix)."""

    name: str
    upstream: str
    listen: str = "127.0.0.1:0"
    enabled: bool = True


@dataclass(frozen=True)
class ProxyInfo:
    """A proxy as the server reports it (``name`` without the prefix)."""

    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[ToxicInfo, ...] = ()


@dataclass(frozen=True)
class HealReport:
    """What a heal did: toxics removed, whether the proxy had to be
    recreated (and why), and the probe that saw traffic again."""

    proxy: str
    removed: tuple[str, ...]
    recreated: str | None
    traffic: Evidence | None

    def to_json(self) -> dict[str, Any]:
        return {
            "proxy": self.proxy,
            "removed": list(self.removed),
            "recreated": self.recreated,
            "traffic": None if self.traffic is None else self.traffic.to_json(),
        }


def unique_prefix(tag: str = "knell") -> str:
    """A name prefix no parallel run shares: ``knell-<pid>-<random>-``."""
    return f"{tag}-{os.getpid()}-{secrets.token_hex(4)}-"


# -- the client ----------------------------------------------------------------------


class ToxiproxyClient:
    """One Toxiproxy server, seen through one name prefix.

    Every method takes and returns *short* names (without the prefix), has
    a timeout, and raises :class:`ToxiproxyError` subclasses only. Safe to
    share between threads."""

    def __init__(self, api_url: str, *, prefix: str = "", timeout: float = DEFAULT_TIMEOUT) -> None:
        if not api_url.startswith(("http://", "https://")):
            raise ValueError(f"api_url must be an http:// URL, got {api_url!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.api_url = api_url.rstrip("/")
        self.prefix = prefix
        self.timeout = timeout
        self._local = threading.local()
        self._known: dict[str, ProxySpec] = {}  # what recreate() needs
        self._known_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ToxiproxyClient({self.api_url!r}, prefix={self.prefix!r})"

    # -- plumbing
    def full(self, name: str) -> str:
        """The name on the server of this client's ``name``."""
        return self.prefix + name

    def _short(self, name: str) -> str:
        return name[len(self.prefix) :]

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False  # never through an HTTP proxy from the environment
            self._local.session = session
        return session

    @contextmanager
    def _target(self, timeout: float | None) -> Iterator[None]:
        token = _TARGET.set(_Target(self.api_url, timeout or self.timeout, self._session()))
        try:
            yield
        finally:
            _TARGET.reset(token)

    def _raw(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        """knell's own call, for what the package lacks."""
        with self._target(timeout):
            response = _Consumer._call(method, path, json=body)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    @staticmethod
    def _toxic(data: dict[str, Any], prefix: str) -> ToxicInfo:
        name = str(data.get("name", ""))
        return ToxicInfo(
            name=name[len(prefix) :] if name.startswith(prefix) else name,
            type=str(data.get("type", "")),
            stream=str(data.get("stream", "downstream")),
            toxicity=float(data.get("toxicity", 1.0)),
            attributes=dict(data.get("attributes") or {}),
        )

    def _proxy(self, data: dict[str, Any]) -> ProxyInfo:
        return ProxyInfo(
            name=self._short(str(data["name"])),
            listen=str(data["listen"]),
            upstream=str(data["upstream"]),
            enabled=bool(data["enabled"]),
            toxics=tuple(self._toxic(t, self.prefix) for t in data.get("toxics") or ()),
        )

    def _remember(self, info: ProxyInfo) -> ProxyInfo:
        with self._known_lock:
            self._known[info.name] = ProxySpec(info.name, info.upstream, info.listen, True)
        return info

    # -- server
    def version(self, *, timeout: float | None = None) -> str:
        """``GET /version`` (own call: the package's ``version()`` first
        checks the class-level address, not this client's)."""
        return str(self._raw("GET", "/version", timeout=timeout)["version"])

    def reset_server(self, *, timeout: float | None = None) -> None:
        """``POST /reset``: every proxy of the server enabled, every toxic
        gone, *including other runs'*. Prefer :meth:`reset`."""
        with self._target(timeout):
            _TpServer().reset()

    # -- proxies
    def proxies(self, *, timeout: float | None = None) -> dict[str, ProxyInfo]:
        """This client's proxies (by short name), with their toxics."""
        data = self._raw("GET", "/proxies", timeout=timeout)
        return {
            self._short(name): self._proxy(value)
            for name, value in sorted(data.items())
            if name.startswith(self.prefix)
        }

    def proxy(self, name: str, *, timeout: float | None = None) -> ProxyInfo:
        """One proxy with its toxics (one ``GET /proxies/{name}``: the
        package would list every proxy, then every toxic)."""
        return self._proxy(self._raw("GET", f"/proxies/{self.full(name)}", timeout=timeout))

    def create_proxy(
        self,
        name: str,
        upstream: str,
        *,
        listen: str = "127.0.0.1:0",
        enabled: bool = True,
        timeout: float | None = None,
    ) -> ProxyInfo:
        """Create a proxy; ``listen`` port 0 picks a free port (see the
        returned ``listen``)."""
        with self._target(timeout):
            try:
                made = _TpServer().create(
                    upstream=upstream, name=self.full(name), listen=listen, enabled=enabled
                )
            except _TpProxyExists:
                raise AlreadyExists("POST /proxies", 409, "proxy already exists") from None
        info = ProxyInfo(name, str(made.listen), str(made.upstream), bool(made.enabled))
        return self._remember(info) if enabled else info

    def update_proxy(
        self,
        name: str,
        *,
        listen: str | None = None,
        upstream: str | None = None,
        enabled: bool | None = None,
        timeout: float | None = None,
    ) -> ProxyInfo:
        """Change ``listen``, ``upstream`` and / or ``enabled`` (own call:
        the package can only flip ``enabled``)."""
        body = {
            key: value
            for key, value in (("listen", listen), ("upstream", upstream), ("enabled", enabled))
            if value is not None
        }
        info = self._proxy(self._raw("POST", f"/proxies/{self.full(name)}", body, timeout))
        return self._remember(info) if info.enabled else info

    def disable(self, name: str, *, timeout: float | None = None) -> None:
        """The *refuse* fault: new connections refused, open ones closed."""
        with self._target(timeout):
            self._handle(name).disable()

    def enable(self, name: str, *, timeout: float | None = None) -> None:
        with self._target(timeout):
            self._handle(name).enable()

    def delete_proxy(
        self, name: str, *, missing_ok: bool = False, timeout: float | None = None
    ) -> None:
        with self._target(timeout):
            try:
                self._handle(name).destroy()
            except NotFound:
                if not missing_ok:
                    raise

    def delete_all(self, *, timeout: float | None = None) -> list[str]:
        """Delete every proxy of this prefix (the end of a run)."""
        names = list(self.proxies(timeout=timeout))
        for name in names:
            self.delete_proxy(name, missing_ok=True, timeout=timeout)
        return names

    def reset(self, *, timeout: float | None = None) -> None:
        """This prefix's proxies enabled and without toxics."""
        for name, info in self.proxies(timeout=timeout).items():
            if not info.enabled:
                self.enable(name, timeout=timeout)
            for toxic in info.toxics:
                self.remove_toxic(name, toxic.name, missing_ok=True, timeout=timeout)

    def populate(
        self, specs: Sequence[ProxySpec], *, timeout: float | None = None
    ) -> list[ProxyInfo]:
        """``POST /populate`` (own call: the package's populate deletes and
        recreates client-side). A proxy whose ``listen`` and ``upstream``
        are unchanged keeps its toxics and connections."""
        body = [
            {
                "name": self.full(s.name),
                "listen": s.listen,
                "upstream": s.upstream,
                "enabled": s.enabled,
            }
            for s in specs
        ]
        data = self._raw("POST", "/populate", body, timeout)
        return [self._remember(self._proxy(p)) for p in (data or {}).get("proxies") or ()]

    def _handle(self, name: str) -> Any:
        return _TpProxy(name=self.full(name), upstream="", enabled=True, listen="")

    # -- toxics
    def toxics(self, proxy: str, *, timeout: float | None = None) -> list[ToxicInfo]:
        with self._target(timeout):
            found = self._handle(proxy).toxics()
        return [
            self._toxic(
                {
                    "name": t.name,
                    "type": t.type,
                    "stream": t.stream,
                    "toxicity": t.toxicity,
                    "attributes": t.attributes,
                },
                self.prefix,
            )
            for t in found.values()
        ]

    def apply_toxic(
        self, proxy: str, spec: ToxicSpec, *, timeout: float | None = None
    ) -> ToxicInfo:
        """Add a toxic (its name gets the prefix). Raises
        :class:`AdminTimeout` if the server does not answer in time: then
        :meth:`recreate` the proxy before trying again."""
        with self._target(timeout):
            self._handle(proxy).add_toxic(
                type=spec.type,
                stream=spec.stream,
                name=self.full(spec.local_name),
                toxicity=spec.toxicity,
                attributes=dict(spec.attributes),
            )
        return ToxicInfo(
            spec.local_name, spec.type, spec.stream, spec.toxicity, dict(spec.attributes)
        )

    def update_toxic(
        self,
        proxy: str,
        name: str,
        *,
        attributes: dict[str, int] | None = None,
        toxicity: float | None = None,
        timeout: float | None = None,
    ) -> ToxicInfo:
        """Change a toxic's attributes and / or toxicity (own call: the
        package has none)."""
        body: dict[str, Any] = {}
        if attributes is not None:
            body["attributes"] = attributes
        if toxicity is not None:
            body["toxicity"] = toxicity
        path = f"/proxies/{self.full(proxy)}/toxics/{self.full(name)}"
        return self._toxic(self._raw("POST", path, body, timeout), self.prefix)

    def remove_toxic(
        self, proxy: str, name: str, *, missing_ok: bool = False, timeout: float | None = None
    ) -> None:
        """Remove a toxic. Raises :class:`AdminTimeout` if the server hangs
        (Toxiproxy can, under traffic): :meth:`recreate` the proxy then."""
        with self._target(timeout):
            try:
                self._handle(proxy).destroy_toxic(self.full(name))
            except NotFound:
                if not missing_ok:
                    raise

    # -- proving and healing
    def recreate(self, name: str, *, timeout: float | None = None) -> ProxyInfo:
        """Replace a stuck proxy: delete it (if the server lets us) and
        create it again on the *same* listen address, enabled, with no
        toxics, so clients reconnect where they were."""
        with self._known_lock:
            spec = self._known.get(name)
        if spec is None:
            info = self.proxy(name, timeout=timeout)
            spec = ProxySpec(name, info.upstream, info.listen)
        self.delete_proxy(name, missing_ok=True, timeout=timeout)
        return self.create_proxy(name, spec.upstream, listen=spec.listen, timeout=timeout)

    def listen_of(self, name: str) -> str:
        """The address clients (and probes) connect to."""
        with self._known_lock:
            spec = self._known.get(name)
        return spec.listen if spec is not None else self.proxy(name).listen

    def prove(
        self,
        proxy: str,
        toxics: Sequence[ToxicSpec] = (),
        exchange: Exchange | str = "echo",
        *,
        disabled: bool = False,
        hold_ms: float = 300.0,
    ) -> Proof:
        """Probe the proxy for the fault made of ``toxics`` (or the refuse
        fault, ``disabled``); see :func:`knell.nemesis.probe.prove`."""
        return prove(self.listen_of(proxy), toxics, exchange, disabled=disabled, hold_ms=hold_ms)

    def heal(
        self,
        proxy: str,
        toxics: Sequence[str] = (),
        exchange: Exchange | str = "echo",
        *,
        enable: bool = False,
        traffic_timeout: float = 10.0,
        timeout: float | None = None,
    ) -> HealReport:
        """End a fault and make sure it ended: remove ``toxics`` (short
        names) and / or re-``enable`` the proxy; if a call times out or the
        server still lists the fault afterwards, recreate the proxy; then
        wait until a probe gets a reply through it. Raises
        :class:`knell.nemesis.probe.LinkDown` if traffic never comes back."""
        recreated: str | None = None
        try:
            for name in toxics:
                self.remove_toxic(proxy, name, missing_ok=True, timeout=timeout)
            if enable:
                self.enable(proxy, timeout=timeout)
            info = self.proxy(proxy, timeout=timeout)
            left = {t.name for t in info.toxics} & set(toxics)
            if left or (enable and not info.enabled):
                recreated = f"heal did not take: still {sorted(left) or 'disabled'}"
        except (AdminTimeout, Unreachable, ApiRefused) as exc:
            recreated = f"{type(exc).__name__}: {exc}"
        if recreated is not None:
            self.recreate(proxy, timeout=timeout)
        ex = EXCHANGES[exchange] if isinstance(exchange, str) else exchange
        evidence = wait_carries_traffic(self.listen_of(proxy), ex, timeout=traffic_timeout)
        return HealReport(proxy, tuple(toxics), recreated, evidence)


# -- which server ----------------------------------------------------------------


@dataclass
class ServerHandle:
    """A Toxiproxy API to use: ``kind`` is ``env`` (``TOXIPROXY_URL``),
    ``toxiproxy-server`` or ``knell`` (knell's own). ``stop()`` stops what
    this process started (nothing for ``env``)."""

    api_url: str
    kind: Literal["env", "toxiproxy-server", "knell"]
    pid: int | None = None
    _process: subprocess.Popen[bytes] | None = None
    _work: Path | None = None

    def stop(self, timeout: float = 5.0) -> None:
        proc = self._process
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


LocalProxy = ServerHandle


def _wait_file(path: Path, proc: subprocess.Popen[bytes], timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(OSError, ValueError):
            return path.read_text(encoding="utf-8")
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready: {err}")
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{what} was not ready within {timeout:g} s")


def start_local_proxy(
    parent_pid: int | None = None,
    *,
    owner: Any = None,
    listen: str = "127.0.0.1:0",
    ready_timeout: float = 15.0,
) -> ServerHandle:
    """Start knell's own server (``python -m knell.proxy``) on
    loopback, leashed to ``parent_pid`` and recorded with ``owner`` (a
    :class:`knell.owners.Owner`) when given. The leash watches the direct
    parent, so ``parent_pid`` is this process's pid (the default)."""
    parent = os.getpid() if parent_pid is None else parent_pid
    if parent != os.getpid():
        raise ValueError(
            f"parent_pid must be this process ({os.getpid()}): the leash watches the direct "
            f"parent, got {parent}"
        )
    work = Path(tempfile.mkdtemp(prefix="knell-proxy-"))
    ready = work / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knell.proxy",
            "--listen",
            listen,
            "--ready-file",
            str(ready),
            "--parent-pid",
            str(parent),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    contain(proc)  # Windows: dies with knell (a kill-on-close job)
    if owner is not None:
        owner.process(proc.pid, "knell-proxy")
        owner.resource("directory", str(work))  # knell reap removes it after a SIGKILL
    try:
        data = json.loads(_wait_file(ready, proc, ready_timeout, "knell proxy"))
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return ServerHandle(str(data["api"]), "knell", int(data["pid"]), proc, work)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_toxiproxy_server(binary: str, owner: Any, ready_timeout: float) -> ServerHandle:
    """A real ``toxiproxy-server`` on loopback, under the keeper leash
    (the keeper watches this process and kills the server when it dies)."""
    work = Path(tempfile.mkdtemp(prefix="knell-toxiproxy-"))
    port = _free_port()
    pidfile = work / "server.pid"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knell.platform.keeper",
            str(os.getpid()),
            "--pidfile",
            str(pidfile),
            "--",
            binary,
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    contain(proc)  # Windows: dies with knell (a kill-on-close job)
    pid = int(_wait_file(pidfile, proc, ready_timeout, "toxiproxy-server keeper").strip())
    if owner is not None:
        owner.process(pid, "toxiproxy-server", group=True)
    handle = ServerHandle(f"http://127.0.0.1:{port}", "toxiproxy-server", pid, proc, work)
    client = ToxiproxyClient(handle.api_url, timeout=1.0)
    deadline = time.monotonic() + ready_timeout
    while True:
        try:
            client.version()
            return handle
        except ToxiproxyError:
            if time.monotonic() > deadline or proc.poll() is not None:
                handle.stop()
                raise RuntimeError(f"toxiproxy-server did not answer on port {port}") from None
            time.sleep(0.05)


def find_server(
    parent_pid: int | None = None, *, owner: Any = None, ready_timeout: float = 15.0
) -> ServerHandle:
    """The Toxiproxy server a run should use: ``TOXIPROXY_URL`` if set
    (checked with ``GET /version``), else ``toxiproxy-server`` from PATH,
    else knell's own."""
    url = os.environ.get("TOXIPROXY_URL")
    if url:
        try:
            ToxiproxyClient(url, timeout=2.0).version()
        except ToxiproxyError as exc:
            raise RuntimeError(f"TOXIPROXY_URL={url} does not answer: {exc}") from None
        return ServerHandle(url.rstrip("/"), "env")
    binary = shutil.which("toxiproxy-server")
    if binary:
        return _start_toxiproxy_server(binary, owner, ready_timeout)
    return start_local_proxy(parent_pid, owner=owner, ready_timeout=ready_timeout)
