"""Sentinel's TILT mode as knell reads it (knell.stores.redis.tilt), on
handcrafted INFO replies and a fake clock; the real Sentinels' TILT is in
tests/stores/test_replicated_redis.py."""

from __future__ import annotations

import pytest

from knell.stores.base import StoreError
from knell.stores.redis.tilt import TiltWatch, info_fields, tilted, wait_out_tilt

INFO = (
    "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:{tilt}\r\n"
    "sentinel_tilt_since_seconds:-1\r\nmaster0:name=knell,status=ok,address=127.0.0.1:6379\r\n"
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_info_fields_skip_headers_and_keep_values_with_colons() -> None:
    fields = info_fields(INFO.format(tilt=1))
    assert fields["sentinel_tilt"] == "1"
    assert fields["master0"] == "name=knell,status=ok,address=127.0.0.1:6379"
    assert not any(key.startswith("#") for key in fields)


def test_tilted_names_only_the_sentinels_in_tilt() -> None:
    infos = {
        "sentinel-2": info_fields(INFO.format(tilt=1)),
        "sentinel-0": info_fields(INFO.format(tilt=1)),
        "sentinel-1": info_fields(INFO.format(tilt=0)),
        "sentinel-3": {},
    }
    assert tilted(infos) == ["sentinel-0", "sentinel-2"]


def test_no_tilt_means_no_wait() -> None:
    clock = Clock()
    calm = {"sentinel-0": {"sentinel_tilt": "0"}}
    assert wait_out_tilt(lambda: calm, clock=clock, sleep=clock.sleep) == 0.0
    assert clock.now == 100.0


def test_the_wait_ends_when_the_last_sentinel_leaves_tilt() -> None:
    clock = Clock()

    def read() -> dict[str, dict[str, str]]:
        return {
            "sentinel-0": {"sentinel_tilt": "1" if clock.now < 120 else "0"},
            "sentinel-1": {"sentinel_tilt": "1" if clock.now < 130 else "0"},
        }

    waited = wait_out_tilt(read, clock=clock, sleep=clock.sleep, poll=0.5)
    assert waited == pytest.approx(30.0)


def test_a_tilt_that_outlasts_the_wait_is_a_store_error_naming_the_sentinels() -> None:
    clock = Clock()
    stuck = {"sentinel-1": {"sentinel_tilt": "1"}, "sentinel-0": {"sentinel_tilt": "0"}}
    with pytest.raises(StoreError, match=r"sentinel-1 still in TILT mode after 45 s"):
        wait_out_tilt(lambda: stuck, timeout=45, clock=clock, sleep=clock.sleep)


def test_the_watch_asks_at_most_once_a_second_and_says_who_was_seen() -> None:
    clock = Clock()
    asked: list[float] = []

    def read() -> dict[str, dict[str, str]]:
        asked.append(clock.now)
        return {"sentinel-1": {"sentinel_tilt": "1" if len(asked) == 2 else "0"}}

    watch = TiltWatch(read, clock=clock)
    assert watch.note() == ""
    for _ in range(40):  # 2 s of a promotion loop polling every 50 ms
        watch.look()
        clock.sleep(0.05)
    assert asked == pytest.approx([100.0, 101.0], abs=0.06)
    assert watch.seen == {"sentinel-1"}
    assert "sentinel-1 went into TILT mode meanwhile" in watch.note()
