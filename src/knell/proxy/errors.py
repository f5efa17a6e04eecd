"""The API's errors, with Toxiproxy's messages and status codes.

Toxiproxy answers every error with ``{"error": MESSAGE, "status": CODE}``
(written through Go's ``http.Error``, so as ``text/plain`` with a trailing
newline), and its clients match on the message: the Go client reports
``create: HTTP 409: proxy already exists``. The catalogue below is
Toxiproxy's (``api.go``); a failure that is not in it (a listen address in
use, an address that does not resolve) is a 500 carrying the system's
message, as there.
"""

from __future__ import annotations

__all__ = [
    "ApiError",
    "bad_body",
    "invalid_stream",
    "invalid_toxic_type",
    "missing_field",
    "proxy_exists",
    "proxy_not_found",
    "server_error",
    "toxic_exists",
    "toxic_not_found",
]


class ApiError(Exception):
    """An error the API answers with ``status`` and ``{"error": message}``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def to_json(self) -> dict[str, object]:
        return {"error": self.message, "status": self.status}


def bad_body(detail: str) -> ApiError:
    return ApiError(f"bad request body: {detail}", 400)


def missing_field(field: str) -> ApiError:
    return ApiError(f"missing required field: {field}", 400)


def proxy_not_found() -> ApiError:
    return ApiError("proxy not found", 404)


def proxy_exists() -> ApiError:
    return ApiError("proxy already exists", 409)


def invalid_stream() -> ApiError:
    return ApiError("stream was invalid, can be either upstream or downstream", 400)


def invalid_toxic_type() -> ApiError:
    return ApiError("invalid toxic type", 400)


def toxic_exists() -> ApiError:
    return ApiError("toxic already exists", 409)


def toxic_not_found() -> ApiError:
    return ApiError("toxic not found", 404)


def server_error(message: str) -> ApiError:
    return ApiError(message, 500)
