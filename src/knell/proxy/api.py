"""Toxiproxy's HTTP API (``api.go``), served by Starlette.

Routes, JSON shapes, status codes and error bodies are Toxiproxy's, so any
Toxiproxy client (``toxiproxy-python``, the Go client, ``toxiproxy-cli``)
drives this server unchanged:

====================================  ======  ==============================
route                                 ok      body
====================================  ======  ==============================
``GET /version``                      200     ``{"version": "..."}``
``GET /proxies``                      200     ``{name: proxy, ...}``
``POST /proxies``                     201     the proxy
``POST /populate``                    201     ``{"proxies": [...]}``
``GET /proxies/{p}``                  200     the proxy with its toxics
``POST|PATCH /proxies/{p}``           200     the proxy (``enabled``, ``listen``, ``upstream``)
``DELETE /proxies/{p}``               204
``GET /proxies/{p}/toxics``           200     ``[toxic, ...]``
``POST /proxies/{p}/toxics``          200     the toxic
``GET /proxies/{p}/toxics/{t}``       200     the toxic
``POST|PATCH /proxies/{p}/toxics/{t}`` 200    the toxic (``toxicity``, ``attributes``)
``DELETE /proxies/{p}/toxics/{t}``    204
``POST /reset``                       204
====================================  ======  ==============================

Errors are ``{"error": ..., "status": ...}`` (see :mod:`.errors`); a failed
populate answers with the error's status and the proxies it did create
beside the error. Like Toxiproxy, every answer carries an
``X-Toxiproxy-Request-Id``, and a browser's ``User-Agent`` (``Mozilla/``)
gets a 403, so a web page cannot drive the API from a developer's browser.

Why Starlette: routing with path parameters, request bodies and responses
is what it is made for, it is small and well kept, and it runs as an ASGI
app under uvicorn inside the same asyncio loop as the proxies, so a handler
changes a proxy's toxics directly, with no threads or locks between the API
and the data path.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from knell.proxy.errors import ApiError, bad_body, toxic_exists
from knell.proxy.registry import ProxySpec, Registry
from knell.proxy.toxics import parse_header, parse_update

__all__ = ["VERSION", "build_app"]

VERSION = "2.12.0+knell"
"""The Toxiproxy release whose API this server follows, marked as knell's."""

Handler = Callable[[Request], Awaitable[Response]]


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


def _error(exc: ApiError) -> Response:
    """As Go's ``http.Error`` writes it: text/plain, a trailing newline."""
    return Response(
        orjson.dumps(exc.to_json()) + b"\n",
        exc.status,
        media_type="text/plain; charset=utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


def _no_content() -> Response:
    return Response(status_code=204)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


async def _body(request: Request) -> Any:
    """The request's first JSON value (Go's decoder ignores what follows)."""
    raw = (await request.body()).decode("utf-8", errors="replace").lstrip()
    if not raw:
        raise bad_body("EOF")
    try:
        value, _ = json.JSONDecoder(parse_constant=_reject_constant).raw_decode(raw)
    except json.JSONDecodeError as exc:
        raise bad_body(f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:
        raise bad_body(str(exc)) from None
    return value


def _json_value(value: Any) -> str:
    """A JSON value as Go's encoding/json names it in an unmarshal error."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _proxy_spec(value: Any, defaults: ProxySpec, where: str) -> ProxySpec:
    """Decode a proxy object over ``defaults``; absent or null fields keep them."""
    if not isinstance(value, dict):
        raise bad_body(f"json: cannot unmarshal {_json_value(value)} into Go value of type {where}")
    fields: dict[str, Any] = {}
    for key, want_type in (("name", str), ("listen", str), ("upstream", str), ("enabled", bool)):
        field = value.get(key)
        if field is None:
            continue
        if not isinstance(field, want_type):
            want = "string" if want_type is str else "bool"
            raise bad_body(
                f"json: cannot unmarshal {_json_value(field)} into Go struct field "
                f"Proxy.{key} of type {want}"
            )
        fields[key] = field
    return ProxySpec(
        name=fields.get("name", defaults.name),
        listen=fields.get("listen", defaults.listen),
        upstream=fields.get("upstream", defaults.upstream),
        enabled=fields.get("enabled", defaults.enabled),
    )


_NEW = ProxySpec(name="", listen="", upstream="", enabled=True)


def build_app(registry: Registry) -> ASGIApp:
    """The API over ``registry``, as an ASGI app."""

    def api(handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as exc:
                return _error(exc)

        return wrapped

    async def version(request: Request) -> Response:
        return Response(
            f'{{"version": "{VERSION}"}}\n'.encode(),
            media_type="application/json;charset=utf-8",
        )

    async def proxy_index(request: Request) -> Response:
        return _json({proxy.name: proxy.to_json() for proxy in registry.sorted()})

    async def proxy_create(request: Request) -> Response:
        spec = _proxy_spec(await _body(request), _NEW, "toxiproxy.Proxy")
        proxy = await registry.create(spec)
        return _json(proxy.to_json(), 201)

    async def populate(request: Request) -> Response:
        body = await _body(request)
        if not isinstance(body, list):
            got = _json_value(body)
            raise bad_body(f"json: cannot unmarshal {got} into Go value of type []toxiproxy.Proxy")
        specs = [_proxy_spec(item, _NEW, "toxiproxy.Proxy") for item in body]
        done, error = await registry.populate(specs)
        data: dict[str, Any] = error.to_json() if error is not None else {}
        data["proxies"] = [proxy.to_json() for proxy in done] or None
        return _json(data, error.status if error is not None else 201)

    async def proxy_show(request: Request) -> Response:
        return _json(registry.get(request.path_params["proxy"]).to_json())

    async def proxy_update(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        current = ProxySpec(proxy.name, proxy.listen, proxy.upstream, proxy.enabled)
        spec = _proxy_spec(await _body(request), current, "toxiproxy.Proxy")
        async with registry.lock:
            await proxy.update(spec.listen, spec.upstream, spec.enabled)
        return _json(proxy.to_json())

    async def proxy_delete(request: Request) -> Response:
        await registry.delete(request.path_params["proxy"])
        return _no_content()

    async def toxic_index(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        return _json([toxic.to_json() for toxic in proxy.toxics.all()])

    async def toxic_create(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        header = parse_header(await _body(request))
        if proxy.toxics.find(header.name) is not None:
            raise toxic_exists()
        toxic = header.build()
        proxy.toxics.add(toxic)
        return _json(toxic.to_json())

    async def toxic_show(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        return _json(proxy.toxics.get(request.path_params["toxic"]).to_json())

    async def toxic_update(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        toxic = proxy.toxics.get(request.path_params["toxic"])
        toxicity, attributes = parse_update(toxic, await _body(request))
        proxy.toxics.update(toxic, toxicity, attributes)
        return _json(toxic.to_json())

    async def toxic_delete(request: Request) -> Response:
        proxy = registry.get(request.path_params["proxy"])
        proxy.toxics.remove(request.path_params["toxic"])
        return _no_content()

    async def reset(request: Request) -> Response:
        await registry.reset()
        return _no_content()

    routes = [
        Route("/reset", api(reset), methods=["POST"]),
        Route("/proxies", api(proxy_index), methods=["GET"]),
        Route("/proxies", api(proxy_create), methods=["POST"]),
        Route("/populate", api(populate), methods=["POST"]),
        Route("/proxies/{proxy}", api(proxy_show), methods=["GET"]),
        Route("/proxies/{proxy}", api(proxy_update), methods=["POST", "PATCH"]),
        Route("/proxies/{proxy}", api(proxy_delete), methods=["DELETE"]),
        Route("/proxies/{proxy}/toxics", api(toxic_index), methods=["GET"]),
        Route("/proxies/{proxy}/toxics", api(toxic_create), methods=["POST"]),
        Route("/proxies/{proxy}/toxics/{toxic}", api(toxic_show), methods=["GET"]),
        Route("/proxies/{proxy}/toxics/{toxic}", api(toxic_update), methods=["POST", "PATCH"]),
        Route("/proxies/{proxy}/toxics/{toxic}", api(toxic_delete), methods=["DELETE"]),
        Route("/version", api(version), methods=["GET"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 404:  # gorilla/mux's answers
            return Response(b"404 page not found\n", 404, media_type="text/plain; charset=utf-8")
        return Response(b"", status)

    async def crash(request: Request, exc: Exception) -> Response:
        return _error(ApiError(f"{type(exc).__name__}: {exc}", 500))

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: crash})
    return _Toxiproxy(app)


class _Toxiproxy:
    """Toxiproxy's middleware: a request id on every answer
    (``X-Toxiproxy-Request-Id``) and no API calls from web pages
    (``stopBrowsersMiddleware``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = secrets.token_hex(10).encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-toxiproxy-request-id", request_id))
                message = {**message, "headers": headers}
            await send(message)

        for key, value in scope["headers"]:
            if key == b"user-agent" and value.startswith(b"Mozilla/"):
                response = Response(
                    b"User agent not allowed\n", 403, media_type="text/plain; charset=utf-8"
                )
                await response(scope, receive, send_with_id)
                return
        await self.app(scope, receive, send_with_id)
