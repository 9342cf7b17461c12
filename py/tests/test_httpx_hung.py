"""C10 through breakerbank.httpx: a real server on 127.0.0.1 that accepts
the request and never answers trips the breaker, whether the client's own
`timeout=` gives up at the caller's deadline or the caller's task is
cancelled (asyncio.wait_for); once open, no request reaches the server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from conftest import dep_yaml, metric, profile
from loopback import FlakyServer

import breakerbank as bb
from breakerbank.httpx import AsyncBreakerTransport, BreakerTransport

# The caller's deadline: what it waits for an answer, in seconds.
DEADLINE = 0.05

HUNG = profile(
    dep_yaml(
        "search_client",
        trip="{consecutive_failures: 3, slow_call: 20ms}",
        fallback="{kind: error, code: SEARCH_DOWN}",
    )
)


@pytest.fixture
def hung() -> Iterator[FlakyServer]:
    s = FlakyServer()
    s.hold = True  # each request waits for `release`, which only close() sets
    yield s
    s.close()


def tenant_of(request: httpx.Request) -> str:
    return request.headers["x-tenant"]


def test_c10_a_hung_server_trips_through_the_sync_transport_at_the_client_timeout(
    hung: FlakyServer,
) -> None:
    bank = bb.Bank.from_yaml(HUNG)
    dep = bank["search_client"]
    h = {"x-tenant": "acme"}
    with httpx.Client(
        transport=BreakerTransport(dep, tenant=tenant_of), timeout=DEADLINE
    ) as c:
        for _ in range(3):
            with pytest.raises(httpx.TimeoutException):
                c.get(hung.url, headers=h)
        assert dep.state(tenant="acme") == "open"
        with pytest.raises(bb.DependencyUnavailable) as e:
            c.get(hung.url, headers=h)
        assert e.value.code == "SEARCH_DOWN"
    assert hung.hits["acme"] == 3, "the open breaker kept the request from the server"
    assert metric(bank, "search_client", "acme", "failures_total") == 3
    assert metric(bank, "search_client", "acme", "cancelled_total") == 0


def test_c10_a_hung_server_trips_through_the_async_transport_given_up_by_wait_for(
    hung: FlakyServer,
) -> None:
    bank = bb.Bank.from_yaml(HUNG)
    dep = bank["search_client"]
    h = {"x-tenant": "acme"}

    async def main() -> None:
        # No client timeout: the caller gives up at its deadline, which
        # cancels the request inside the transport (a cancellation, that
        # had run past slow_call: a slow failure).
        async with httpx.AsyncClient(transport=AsyncBreakerTransport(dep, tenant=tenant_of)) as c:
            for _ in range(3):
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(c.get(hung.url, headers=h), DEADLINE)
            assert dep.state(tenant="acme") == "open"
            with pytest.raises(bb.DependencyUnavailable):
                await c.get(hung.url, headers=h)

    asyncio.run(main())
    assert hung.hits["acme"] == 3
    assert metric(bank, "search_client", "acme", "failures_total") == 3
    assert metric(bank, "search_client", "acme", "cancelled_total") == 0
    # Another tenant's partition was never touched (C1).
    assert dep.state(tenant="globex") == "closed"
