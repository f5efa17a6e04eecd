"""The HTTP bridge: any bus, served over HTTP + JSON.

Agents that cannot open a store directly (another language, another host,
a sandbox) reach a bus through a bridge: a small server that exposes
every contract the bus implements (broadcast, queue, at-most-once: one
route per row of :data:`knell.buses.operations.OPERATIONS`) with one
error envelope, so a client through the bridge records ``fail``,
``info`` and each refusal exactly as a direct client would. A bridge is
also a new place for things to go wrong (it can be killed mid-request,
paused, or answer before the store commits), so knell runs it as one
more process under chaos, and its mutants
(:mod:`knell.buses.mutants.bridge`) prove the checks catch a bad one.

* :mod:`knell.buses.http_protocol` (with the buses, not here): routes,
  names, error codes, shared with the driver (:mod:`knell.buses.http`),
  which therefore never imports this package;
* :mod:`.models`: the JSON bodies, built from the operations table;
  :mod:`.openapi`: the OpenAPI document;
* :mod:`.errors`: the envelope and the bus-error mapping;
* :mod:`.app`: the ASGI app; :mod:`.drain`: a refused request's body
  read before its answer, so the answer is not lost to a reset;
* :mod:`.server`: one bridge process; :mod:`.deadlines`: a read deadline
  on every request, so a slow client cannot hold a connection;
  :mod:`.cli`: ``knell bridge`` / ``python -m knell.bridge``.

This package's ``__init__`` imports nothing, so importing one module of
it never loads Starlette or uvicorn by accident.
"""

__all__: list[str] = []
