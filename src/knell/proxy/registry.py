"""The proxies of one server, by name: Toxiproxy's ``ProxyCollection``.

Every change goes through one lock, so two admin calls never interleave
halfway (a populate and a delete of the same name, say); none of them waits
for traffic, so the lock is never held for long.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from knell.proxy.errors import ApiError, missing_field, proxy_exists, proxy_not_found
from knell.proxy.proxy import Proxy

__all__ = ["ProxySpec", "Registry"]


@dataclass(frozen=True)
class ProxySpec:
    """A proxy as a request describes it."""

    name: str
    listen: str
    upstream: str
    enabled: bool = True


class Registry:
    """The server's proxies."""

    def __init__(self) -> None:
        self.proxies: dict[str, Proxy] = {}
        self.lock = asyncio.Lock()

    def get(self, name: str) -> Proxy:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise proxy_not_found()
        return proxy

    def sorted(self) -> list[Proxy]:
        """By name, the order Go writes a JSON object's keys in."""
        return [self.proxies[name] for name in sorted(self.proxies)]

    async def create(self, spec: ProxySpec) -> Proxy:
        if not spec.name:
            raise missing_field("name")
        if not spec.upstream:
            raise missing_field("upstream")
        async with self.lock:
            if spec.name in self.proxies:
                raise proxy_exists()
            proxy = Proxy(spec.name, spec.listen, spec.upstream)
            if spec.enabled:
                await proxy.start()
            self.proxies[spec.name] = proxy
            return proxy

    async def delete(self, name: str) -> None:
        async with self.lock:
            proxy = self.get(name)
            proxy.stop()
            del self.proxies[name]

    async def populate(self, specs: list[ProxySpec]) -> tuple[list[Proxy], ApiError | None]:
        """Create or replace: an existing proxy with the same ``listen`` and
        ``upstream`` is kept as it is (toxics and all), one that differs is
        replaced. Stops at the first failure and says which proxies were
        done before it."""
        for index, spec in enumerate(specs, start=1):
            if not spec.name:
                return [], missing_field(f"name at proxy {index}")
            if not spec.upstream:
                return [], missing_field(f"upstream at proxy {index}")
        done: list[Proxy] = []
        async with self.lock:
            for spec in specs:
                try:
                    done.append(await self._add_or_replace(spec))
                except ApiError as exc:
                    return done, exc
        return done, None

    async def _add_or_replace(self, spec: ProxySpec) -> Proxy:
        existing = self.proxies.get(spec.name)
        if existing is not None:
            if not await existing.differs(spec.listen, spec.upstream):
                return existing
            existing.stop()
        proxy = Proxy(spec.name, spec.listen, spec.upstream)
        if spec.enabled:
            await proxy.start()
        self.proxies[spec.name] = proxy
        return proxy

    async def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        async with self.lock:
            for proxy in self.sorted():
                await proxy.start()
                proxy.toxics.reset()

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies.clear()
