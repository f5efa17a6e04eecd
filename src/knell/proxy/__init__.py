"""knell's own Toxiproxy: a TCP fault proxy serving Toxiproxy's HTTP API.

knell injects network faults (partitions, refusals, latency, resets...)
through the Toxiproxy HTTP API, and drives a real ``toxiproxy-server``
whenever one is there (``TOXIPROXY_URL``, or the binary on PATH). This
package exists only because no Toxiproxy server can be installed from the
package registries knell's users and CI reach (PyPI, Debian, npm): it is Go,
shipped as release binaries and container images. So knell carries a small
asyncio proxy that speaks the same API with the same JSON shapes, status
codes and toxic semantics (read from Shopify/toxiproxy's ``api.go``,
``proxy.go``, ``link.go`` and ``toxics/*.go``), and the same client code
drives both.

Layout, one role per module:

* :mod:`.server` - the process: binds the API, runs uvicorn and the proxies
  in one asyncio loop, writes the ready file;
* :mod:`.api` - the HTTP routes (Starlette);
* :mod:`.registry` - the proxies by name (create, populate, reset);
* :mod:`.proxy` - one proxy: listener, enable/disable, its toxic chains;
* :mod:`.connection` - one proxied connection: two sockets, two links;
* :mod:`.link` - one direction of a connection: the no-toxic fast path and
  the toxic pipeline;
* :mod:`.toxics` - what each toxic does, and how its JSON is validated;
* :mod:`.addr`, :mod:`.errors` - Go's address text and Toxiproxy's errors.

Run it as ``knell proxy --listen 127.0.0.1:8474`` or ``python -m
knell.proxy --listen 127.0.0.1:0 --ready-file F --parent-pid PID``;
from Python, :func:`knell.nemesis.toxiproxy.start_local_proxy`.
"""

from __future__ import annotations

__all__: list[str] = []  # kept light: ``knell`` imports the CLI command, not the server
