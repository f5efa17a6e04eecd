"""The HTTP bridge: any bus, served over HTTP + JSON.

Agents that cannot open a store directly (another language, another host,
a sandbox) reach a bus through a bridge: a small server that exposes the
whole broadcast contract (post, subscribe, fetch, ack, cursor, head and
the doorbell's long-poll wait) with one error envelope, so a client
through the bridge records ``fail`` and ``info`` exactly as a direct
client would. A bridge is also a new place for things to go wrong (it can
be killed mid-request, paused, or answer before the store commits), so
knell runs it as one more process under chaos, and its mutants
(:mod:`knell.buses.mutants.bridge`) prove the checks catch a bad one.

* :mod:`.protocol`: routes, names, error codes (shared with the driver,
  :mod:`knell.buses.http`; no web framework needed to import it);
* :mod:`.models`: the JSON bodies; :mod:`.openapi`: the OpenAPI document;
* :mod:`.errors`: the envelope and the bus-error mapping;
* :mod:`.app`: the ASGI app; :mod:`.server`: one bridge process;
  :mod:`.cli`: ``knell bridge`` / ``python -m knell.bridge``.

This package's ``__init__`` imports nothing, so a worker that only needs
:mod:`.protocol` never loads Starlette or uvicorn.
"""

__all__: list[str] = []
