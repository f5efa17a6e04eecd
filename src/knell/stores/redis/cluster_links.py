"""The cluster links of a replicated Redis: how its Sentinels and replicas reach each node.

A split brain needs the primary cut off from its own peers (the replicas
that stream from it, the Sentinels that watch it) while the clients on its
side still reach it. The run's links (:mod:`knell.provision`) sit between
the clients and the store, so they cannot do that: the peers' traffic never
passes through them. So the store keeps links of its own: one fault proxy
process (``python -m knell.proxy``, knell's Toxiproxy-compatible server)
with one proxy per data node, and every peer address in the cluster is a
proxy address:

* each node announces its proxy as its own address (``replica-announce-ip``
  and ``replica-announce-port``), so a primary lists its replicas there and
  the Sentinels, which learn the replicas from the primary, dial them there;
* the replicas follow, and the Sentinels monitor, the primary's proxy;
* a client's own link goes to the node's real port (what the Sentinels name
  is translated, see :mod:`.sentinel_url`), past these proxies.

:meth:`ClusterLinks.cut` disables one node's proxy: its listener closes
and every connection through it is closed, so the Sentinels and replicas
see real TCP refused, as across a partition, while the node runs on and
its clients' connections stay up. :meth:`ClusterLinks.heal` enables it on
the same address.

The proxy process is a private server of the run like the nodes: started
through the keeper (:class:`~knell.stores.process.KeptProcess`), so it dies
with a SIGKILLed runner, and on record with the owner for ``knell reap``.
It speaks Toxiproxy's HTTP API; the store talks to it with the standard
library, since the fault proxy's own client belongs to the layer above.
"""

from __future__ import annotations

import json
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from knell.owners import Owner
from knell.stores.base import StoreError, tail
from knell.stores.process import KeptProcess

__all__ = ["ClusterLinks"]

READY_TIMEOUT = 20.0
"""Seconds the proxy process has to serve its API (a loaded machine)."""

API_TIMEOUT = 5.0

UNSET = "127.0.0.1:9"
"""The upstream of a proxy made before its node has a port (a node must be
told its proxy's address before it starts, and its own port is found only
as it starts); :meth:`ClusterLinks.lead_to` sets the real one."""

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Never through an HTTP proxy from the environment: the API is loopback."""


class ClusterLinks:
    """One proxy process, one proxy per data node (see the module docstring)."""

    def __init__(self, store_dir: Path, owner: Owner | None) -> None:
        self.store_dir = store_dir
        self.owner = owner
        self.log = store_dir / "cluster-proxy.log"
        self.ready = store_dir / "cluster-proxy.ready.json"
        self.api: str | None = None
        self.listens: dict[str, str] = {}
        """Node -> ``127.0.0.1:port`` of its proxy (what its peers dial)."""
        self.cut_off: set[str] = set()
        self._process: KeptProcess | None = None

    # -- life ----------------------------------------------------------------

    def start(self) -> None:
        """Start the proxy process and wait until its API answers."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.ready.unlink(missing_ok=True)
        command = [sys.executable, "-m", "knell.proxy", "--listen", "127.0.0.1:0"]
        command += ["--ready-file", str(self.ready.resolve())]
        self._process = KeptProcess(
            "cluster-proxy",
            command,
            log=self.log,
            pidfile=self.log.with_suffix(".pid"),
            owner=self.owner,
        )
        self._process.start()
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready.exists():
            if not self._process.alive():
                raise StoreError(
                    f"the cluster proxy exited before serving: {tail(self.log) or 'no output'}"
                )
            if time.monotonic() >= deadline:
                raise StoreError(f"the cluster proxy did not serve within {READY_TIMEOUT:g} s")
            time.sleep(0.05)
        self.api = str(json.loads(self.ready.read_text(encoding="utf-8"))["api"])

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop("terminate", timeout=5.0)
            self._process = None
        self.ready.unlink(missing_ok=True)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    # -- proxies ---------------------------------------------------------------

    def add(self, node: str) -> int:
        """A proxy for ``node`` on a free loopback port (its upstream set
        later by :meth:`lead_to`); the port."""
        made = self._call("POST", "/proxies", {"name": node, "listen": "127.0.0.1:0",
                                               "upstream": UNSET})  # fmt: skip
        self.listens[node] = str(made["listen"])
        return int(self.listens[node].rsplit(":", 1)[1])

    def lead_to(self, node: str, port: int) -> None:
        """Point ``node``'s proxy at the node's real port."""
        self._call("POST", f"/proxies/{node}", {"upstream": f"127.0.0.1:{port}"})

    def cut(self, node: str) -> str:
        """Disable ``node``'s proxy (its peers' connections close, new ones
        are refused) and prove it: a connect must be refused. Returns the
        evidence, one line."""
        self._call("POST", f"/proxies/{node}", {"enabled": False})
        self.cut_off.add(node)
        host, _, port = self.listens[node].rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except ConnectionRefusedError:
            return f"connect to {self.listens[node]} refused"
        except OSError as exc:
            return f"connect to {self.listens[node]} failed: {exc}"
        raise StoreError(f"redis: {node}'s cluster link {self.listens[node]} still accepts")

    def heal(self, node: str) -> None:
        """Enable ``node``'s proxy again, on the same address."""
        self._call("POST", f"/proxies/{node}", {"enabled": True})
        self.cut_off.discard(node)

    def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.api is None:
            raise StoreError("the cluster proxy has not been started")
        request = urllib.request.Request(
            self.api + path,
            data=json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with _OPENER.open(request, timeout=API_TIMEOUT) as response:
                data = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            why = exc.read().decode("utf-8", errors="replace").strip()
            raise StoreError(f"cluster proxy: {method} {path}: HTTP {exc.code}: {why}") from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"cluster proxy: {method} {path}: {exc}") from None
        if not isinstance(data, dict):
            raise StoreError(f"cluster proxy: {method} {path}: unexpected answer {data!r}")
        return data

    def describe(self) -> dict[str, Any]:
        return {"api": self.api, "proxies": dict(self.listens), "cut": sorted(self.cut_off)}
