"""The one place that knows what is secret, and how a secret travels.

A store password reaches knell in a URL (``--store-url
redis://:PW@host/0``, ``postgresql://user:PW@host/db?...``, or a query
option such as ``?password=PW``) or in a setting (``[store] password``,
``requirepass`` in ``[store] settings``). Everything knell writes can be
read by someone the password was not meant for: run directories are
uploaded as CI artifacts, logs and reports are shared, a terminal is
screen-shared, and any local user can read another process's command line
in ``ps``. So everything that writes a URL or a settings table passes it
through here first:

* :func:`redact_url` gives a URL with every secret replaced by ``***``
  (or another placeholder: a replay line uses a shell variable);
* :func:`redact_settings` masks the values of secret-looking keys;
* :func:`scrub` removes a URL's secrets from any text (an exception's
  message may quote the password without the rest of the URL);
* :func:`redact_text` removes the secrets of every URL written in a text
  whose URLs are not known beforehand (an internal error's traceback).

And a worker or bridge that must *use* the real URL gets it through its
environment (:data:`BUS_URL_ENV`), which only its own user can read, never
through its command line or a file in the run directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = [
    "BUS_URL_ENV",
    "MASK",
    "STORE_URL_ENV",
    "bus_env",
    "is_secret_key",
    "redact_settings",
    "redact_text",
    "redact_url",
    "scrub",
    "secrets_of",
]

MASK = "***"
"""What a secret is replaced by where it would be shown."""

BUS_URL_ENV = "KNELL_BUS_URL"
"""The environment variable that hands a worker or a bridge its real bus
URL (the password-bearing one); its spec file and command line carry the
redacted form only."""

STORE_URL_ENV = "KNELL_EXISTING_STORE_URL"
"""The environment variable ``knell run`` reads an
existing server's URL from when ``--store-url`` is not given: a password
typed on the command line is readable by every user of the machine (``ps``)
for as long as the run lasts; one in the environment is not. (Not
``KNELL_STORE_URL``: that one knell sets for a stdio adapter, naming the
run's own store.)"""

_SECRET_KEY = re.compile(r"pass|secret|token|auth|credential|private|apikey|api_key", re.I)
"""Key names whose values are secrets: ``password``, ``requirepass``,
``masterauth``, ``sslpassword``, ``tls-key-file-pass``, ``token`` ... A
key that only looks secret (``password_encryption``) is masked too:
hiding a harmless value costs nothing, showing a password costs a lot."""


def is_secret_key(key: str) -> bool:
    """Whether a setting or query option named ``key`` holds a secret."""
    return bool(_SECRET_KEY.search(key))


def _placeholder_query(query: str, placeholder: str) -> str:
    """The query string with each secret option's value replaced, written
    back as it was given otherwise (order, blanks, encoding of the rest)."""
    if not query:
        return query
    parts = []
    for item in query.split("&"):
        key, sep, _value = item.partition("=")
        if sep and is_secret_key(key):
            parts.append(f"{key}={placeholder}")
        else:
            parts.append(item)
    return "&".join(parts)


def redact_url(url: str, placeholder: str = MASK) -> str:
    """``url`` with its password (``user:PW@``) and any secret query option
    (``?password=PW``) replaced by ``placeholder``; every other part is
    kept, so the result still says where the store is. Text that is not
    a URL is returned as it is."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # an unparseable netloc (a bad port): hide what looks like one
        return re.sub(r"(://[^/@:]*:)[^/@]*@", rf"\g<1>{placeholder}@", url)
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{placeholder}@{hostport}"
    query = _placeholder_query(parts.query, placeholder)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def secrets_of(url: str) -> list[str]:
    """The secret strings in ``url`` (its password, secret query values),
    as given and as decoded, longest first: what :func:`scrub` hides."""
    try:
        parts = urlsplit(url)
        raw = parts.netloc.rpartition("@")[0].partition(":")[2] if parts.password else ""
        found = [raw, unquote(raw)]
        for item in parts.query.split("&"):
            key, sep, value = item.partition("=")
            if sep and is_secret_key(key):
                found.append(value)
        found += [v for k, v in parse_qsl(parts.query) if is_secret_key(k)]
    except ValueError:
        return []
    found += [quote(s, safe="") for s in list(found)]
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(text: str, *urls: str, placeholder: str = MASK) -> str:
    """``text`` with every secret of ``urls`` replaced by ``placeholder``
    (the whole URL first, then the bare secrets: a driver's error may
    quote the password alone)."""
    for url in urls:
        if not url:
            continue
        text = text.replace(url, redact_url(url, placeholder))
        for secret in secrets_of(url):
            text = text.replace(secret, placeholder)
    return text


_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)[^\s/?#@]*@")
"""The ``scheme://user:`` of a URL with a password, and the password up to ``@``."""

_QUERY_OPTION = re.compile(r"([?&;]([^=&\s?#;]+)=)([^&\s#;'\"]*)")
"""A query option ``?key=value`` (or ``&key=value``) in free text."""


def redact_text(text: str, placeholder: str = MASK) -> str:
    """``text`` with the password of every URL in it (``scheme://user:PW@``)
    and the value of every secret query option (``?password=PW``) replaced
    by ``placeholder``. For text whose URLs knell does not know beforehand
    (a traceback); when it knows the URL, :func:`scrub` also hides the bare
    password."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{placeholder}@", text)
    return _QUERY_OPTION.sub(
        lambda m: f"{m.group(1)}{placeholder}" if is_secret_key(m.group(2)) else m.group(0),
        text,
    )


def redact_settings(settings: Mapping[str, object], placeholder: str = MASK) -> dict[str, object]:
    """A copy of a settings table (``[store]``, its ``settings``) fit to
    write down: secret keys' values masked, URLs redacted, nested tables
    redacted the same way."""
    shown: dict[str, object] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            shown[key] = redact_settings(value, placeholder)
        elif value is None or value == "":
            shown[key] = value
        elif is_secret_key(str(key)):
            shown[key] = placeholder
        elif isinstance(value, str) and "://" in value:
            shown[key] = redact_url(value, placeholder)
        else:
            shown[key] = value
    return shown


def bus_env(url: str) -> dict[str, str]:
    """The environment that hands a worker or a bridge its real bus
    ``url``: empty when the URL holds no secret (its spec says it all)."""
    return {BUS_URL_ENV: url} if redact_url(url) != url else {}
