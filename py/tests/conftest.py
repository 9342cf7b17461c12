"""Shared fixtures: a ManualClock and small profiles (no sleeps anywhere)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator

import pytest
from loopback import FlakyServer

import breakerbank as bb


def dep_yaml(name: str, **fields: str) -> str:
    """One dependency entry; `fields` override the defaults (YAML flow values)."""
    base = {
        "isolation": "tenant",
        "trip": "{consecutive_failures: 3}",
        "open_duration": "30s",
        "half_open": "{probe_budget: 2, success_threshold: 2}",
        "fallback": "{kind: error, code: PAYMENT_UNAVAILABLE}",
        "recovery_bound": "5m",
    }
    base.update(fields)
    body = "".join(f"    {k}: {v}\n" for k, v in base.items() if v is not None)
    return f"  {name}:\n{body}"


def profile(*deps: str) -> str:
    return "dependencies:\n" + "".join(deps)


PROFILE = textwrap.dedent(
    """\
    dependencies:
      payments_client:
        isolation: tenant
        trip: {consecutive_failures: 3}
        open_duration: 30s
        half_open: {probe_budget: 2, success_threshold: 2}
        fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
        recovery_bound: 5m
      email_client:
        isolation: global
        trip: {failure_rate: 0.5, min_calls: 4, window: 10s}
        open_duration: 15s
        half_open: {probe_budget: 1, success_threshold: 1}
        fallback: {kind: degraded}
        recovery_bound: 2m
      rates_client:
        isolation: global
        trip: {consecutive_failures: 2}
        open_duration: 10s
        half_open: {probe_budget: 1, success_threshold: 1}
        fallback: {kind: stale, max_staleness: 10m}
        recovery_bound: 1m
    """
)


class Boom(Exception):
    """The dependency failed."""


def boom(*args: object, **kwargs: object) -> None:
    raise Boom("dependency failed")


@pytest.fixture
def clock() -> bb.ManualClock:
    return bb.ManualClock()


@pytest.fixture
def bank(clock: bb.ManualClock) -> bb.Bank:
    return bb.Bank.from_yaml(PROFILE, clock=clock)


@pytest.fixture
def make_bank(clock: bb.ManualClock) -> Callable[..., bb.Bank]:
    def make(*deps: str) -> bb.Bank:
        return bb.Bank.from_yaml(profile(*deps), clock=clock)

    return make


def fail(dep: bb.Dependency, times: int, tenant: str | None = None) -> None:
    """Records `times` failures through dep.call."""
    for _ in range(times):
        try:
            dep.call(boom, tenant=tenant)
        except Boom:
            pass


def trip(dep: bb.Dependency, tenant: str | None = None, failures: int = 3) -> None:
    fail(dep, failures, tenant)
    assert dep.state(tenant=tenant) == "open"


def partitions(bank: bb.Bank, dep: str) -> dict[str, dict[str, object]]:
    """The live partitions of ``dep`` in ``bank.metrics()``: the snapshot
    without its ``*`` key (the dependency as a whole, C14)."""
    return {p: m for p, m in bank.metrics()[dep].items() if p != "*"}


def metric(bank: bb.Bank, dep: str, partition: str, name: str) -> object:
    return bank.metrics()[dep][partition][name]


# A profile for the HTTP client integrations: `api_client` per tenant with an
# error fallback, `web_client` and `rates_client` global with a degraded and
# a stale one.
HTTP_PROFILE = profile(
    dep_yaml("api_client", fallback="{kind: error, code: API_DOWN}"),
    dep_yaml("web_client", isolation="global", fallback="{kind: degraded}"),
    dep_yaml("rates_client", isolation="global", fallback="{kind: stale, max_staleness: 10m}"),
)


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A loopback HTTP server that fails on demand (tests/loopback.py)."""
    s = FlakyServer()
    yield s
    s.close()


@pytest.fixture
def http_bank(clock: bb.ManualClock) -> bb.Bank:
    return bb.Bank.from_yaml(HTTP_PROFILE, clock=clock)
