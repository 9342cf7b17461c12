"""breakerbank.httpx against the real httpx, talking to a loopback server
that fails on demand (tests/loopback.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest
from conftest import metric
from loopback import FlakyServer, refused_url

import breakerbank as bb
from breakerbank.httpx import AsyncBreakerTransport, BreakerTransport


def by_header(request: httpx.Request) -> str:
    return request.headers["x-tenant"]


def client(dep: bb.Dependency, **kw: object) -> httpx.Client:
    return httpx.Client(transport=BreakerTransport(dep, tenant=by_header, **kw))  # type: ignore[arg-type]


def get(c: httpx.Client, url: str, tenant: str) -> httpx.Response:
    return c.get(url, headers={"x-tenant": tenant})


def test_5xx_trips_and_the_open_breaker_refuses_without_touching_the_server(
    http_bank: bb.Bank, server: FlakyServer
) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 503
    with client(dep) as c:
        for _ in range(3):
            assert get(c, server.url, "acme").status_code == 503
        assert dep.state(tenant="acme") == "open"
        with pytest.raises(bb.DependencyUnavailable) as err:
            get(c, server.url, "acme")
    assert server.hits["acme"] == 3  # the refused request never left the process
    assert err.value.code == "API_DOWN" and err.value.partition == "acme"
    assert err.value.retry_after == pytest.approx(30.0)
    assert metric(http_bank, "api_client", "acme", "failures_total") == 3
    assert metric(http_bank, "api_client", "acme", "fallback_error_total") == 1


def test_4xx_is_a_success_unless_classify_says_otherwise(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 404
    server.status["globex"] = 429
    with client(dep) as c:
        for _ in range(5):
            assert get(c, server.url, "acme").status_code == 404
    assert dep.state(tenant="acme") == "closed"
    assert metric(http_bank, "api_client", "acme", "failures_total") == 0

    def throttled(result: object) -> str | None:
        if isinstance(result, httpx.Response) and result.status_code == 429:
            return "failure"
        return None  # the default rule for everything else

    with client(dep, classify=throttled) as c:
        for _ in range(3):
            assert get(c, server.url, "globex").status_code == 429
        assert get(c, server.url, "acme").status_code == 404  # default rule: a success
    assert dep.state(tenant="globex") == "open"
    assert dep.state(tenant="acme") == "closed"


def test_classify_can_count_a_5xx_as_cancelled(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 503
    with client(dep, classify=lambda r: "cancelled") as c:
        for _ in range(5):
            get(c, server.url, "acme")
    assert dep.state(tenant="acme") == "closed"
    assert metric(http_bank, "api_client", "acme", "cancelled_total") == 5
    with client(dep, classify=lambda r: "maybe") as c, pytest.raises(ValueError, match="classify returned 'maybe'"):
        get(c, server.url, "acme")
    assert metric(http_bank, "api_client", "acme", "cancelled_total") == 6


def test_connection_refused_counts_as_a_failure(http_bank: bb.Bank) -> None:
    dep = http_bank["api_client"]
    url = refused_url()
    with client(dep) as c:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                get(c, url, "acme")
        assert dep.state(tenant="acme") == "open"
        with pytest.raises(bb.DependencyUnavailable):
            get(c, url, "acme")
    assert metric(http_bank, "api_client", "acme", "failures_total") == 3


def test_a_timeout_counts_as_a_failure(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.hold = True  # no answer until released
    with client(dep) as c, pytest.raises(httpx.ReadTimeout):
        c.get(server.url, headers={"x-tenant": "acme"}, timeout=0.2)
    server.release.set()
    assert metric(http_bank, "api_client", "acme", "failures_total") == 1


def test_half_open_probes_close_the_breaker_or_reopen_it(
    http_bank: bb.Bank, clock: bb.ManualClock, server: FlakyServer
) -> None:  # C7
    dep = http_bank["api_client"]
    server.status["acme"] = 500
    with client(dep) as c:
        for _ in range(3):
            get(c, server.url, "acme")
        clock.advance(30)
        # A failed probe reopens at once.
        assert get(c, server.url, "acme").status_code == 500
        assert dep.state(tenant="acme") == "open"
        assert server.hits["acme"] == 4
        # The dependency recovers: two probes (success_threshold 2) close it.
        del server.status["acme"]
        clock.advance(120)
        assert get(c, server.url, "acme").status_code == 200
        assert dep.state(tenant="acme") == "half_open"
        assert get(c, server.url, "acme").status_code == 200
        assert dep.state(tenant="acme") == "closed"
    assert metric(http_bank, "api_client", "acme", "half_opened_total") == 2
    assert metric(http_bank, "api_client", "acme", "closed_total") == 1


def test_a_streamed_probe_holds_its_slot_until_the_response_is_closed(
    http_bank: bb.Bank, clock: bb.ManualClock, server: FlakyServer
) -> None:  # C7, C10
    dep = http_bank["api_client"]
    server.status["acme"] = 503
    with client(dep) as c:
        for _ in range(3):
            get(c, server.url, "acme")
        del server.status["acme"]
        clock.advance(30)
        headers = {"x-tenant": "acme"}
        with c.stream("GET", server.url, headers=headers) as one, c.stream("GET", server.url, headers=headers) as two:
            assert one.status_code == two.status_code == 200
            # Both probes are in flight: the budget of 2 is spent.
            with pytest.raises(bb.DependencyUnavailable):
                get(c, server.url, "acme")
            assert dep.state(tenant="acme") == "half_open"
            one.read()
        assert dep.state(tenant="acme") == "closed"  # recorded on close
    assert server.hits["acme"] == 5
    assert metric(http_bank, "api_client", "acme", "probe_rejects_total") == 1


def test_the_outcome_is_recorded_when_the_response_is_closed(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 502
    with client(dep) as c:
        with c.stream("GET", server.url, headers={"x-tenant": "acme"}) as r:
            assert r.status_code == 502
            assert metric(http_bank, "api_client", "acme", "failures_total") == 0
        assert metric(http_bank, "api_client", "acme", "failures_total") == 1
        # Closing twice records nothing more.
        r.close()
    assert metric(http_bank, "api_client", "acme", "failures_total") == 1


def test_an_error_mid_body_is_a_failure(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.truncate = True
    with client(dep) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            get(c, server.url, "acme")  # a 200 whose body is cut short
        with c.stream("GET", server.url, headers={"x-tenant": "acme"}) as r:
            assert r.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):
                r.read()
    assert metric(http_bank, "api_client", "acme", "failures_total") == 2


def test_tenants_are_isolated(http_bank: bb.Bank, server: FlakyServer) -> None:  # C9
    dep = http_bank["api_client"]
    server.status["acme"] = 503
    with client(dep) as c:
        for _ in range(5):
            for tenant in ("acme", "globex", "initech"):
                try:
                    get(c, server.url, tenant)
                except bb.DependencyUnavailable:
                    assert tenant == "acme"
    assert dep.state(tenant="acme") == "open"
    assert dep.state(tenant="globex") == dep.state(tenant="initech") == "closed"
    assert server.hits == {"acme": 3, "globex": 5, "initech": 5}


def test_a_fixed_tenant_and_a_missing_one(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 503
    with httpx.Client(transport=BreakerTransport(dep, tenant="acme")) as c:
        for _ in range(3):
            c.get(server.url, headers={"x-tenant": "acme"})
    assert dep.state(tenant="acme") == "open"
    with httpx.Client(transport=BreakerTransport(dep)) as c, pytest.raises(bb.TenantRequired):
        c.get(server.url)
    assert server.hits == {"acme": 3}


def test_a_degraded_fallback_returns_the_declared_response(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["web_client"]
    server.default = 500

    def cached_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=f"degraded {request.url.path}", request=request)

    with httpx.Client(transport=BreakerTransport(dep, degraded=cached_page)) as c:
        for _ in range(3):
            assert c.get(server.url).status_code == 500
        r = c.get(server.url)
    assert (r.status_code, r.text) == (200, "degraded /")
    assert server.total_hits == 3
    assert metric(http_bank, "web_client", "global", "fallback_degraded_total") == 1
    # Without a degraded callable, the refusal raises.
    with httpx.Client(transport=BreakerTransport(dep)) as c, pytest.raises(bb.DependencyUnavailable):
        c.get(server.url)


def test_a_stale_fallback_raises_and_serves_no_value_kept_by_other_calls(
    http_bank: bb.Bank, server: FlakyServer
) -> None:
    dep = http_bank["rates_client"]
    assert dep.call(lambda: {"eur": 1.1}) == {"eur": 1.1}  # kept for the key ""
    server.default = 503
    with httpx.Client(transport=BreakerTransport(dep)) as c:
        for _ in range(3):
            c.get(server.url)
        with pytest.raises(bb.DependencyUnavailable):
            c.get(server.url)
    assert server.total_hits == 3


def test_async_transport_trips_refuses_and_recovers(
    http_bank: bb.Bank, clock: bb.ManualClock, server: FlakyServer
) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 503

    async def main() -> None:
        transport = AsyncBreakerTransport(dep, tenant=by_header)
        async with httpx.AsyncClient(transport=transport) as c:
            h = {"x-tenant": "acme"}
            for _ in range(3):
                assert (await c.get(server.url, headers=h)).status_code == 503
            assert dep.state(tenant="acme") == "open"
            with pytest.raises(bb.DependencyUnavailable):
                await c.get(server.url, headers=h)
            assert (await c.get(server.url, headers={"x-tenant": "globex"})).status_code == 200
            del server.status["acme"]
            clock.advance(30)
            async with c.stream("GET", server.url, headers=h) as r:
                assert dep.state(tenant="acme") == "half_open"
                await r.aread()
            assert (await c.get(server.url, headers=h)).status_code == 200
            assert dep.state(tenant="acme") == "closed"

    asyncio.run(main())
    assert server.hits == {"acme": 5, "globex": 1}


def test_async_connection_refused_and_cancellation(http_bank: bb.Bank, server: FlakyServer) -> None:  # C10
    dep = http_bank["api_client"]
    url = refused_url()

    async def main() -> None:
        async with httpx.AsyncClient(transport=AsyncBreakerTransport(dep, tenant=by_header)) as c:
            with pytest.raises(httpx.ConnectError):
                await c.get(url, headers={"x-tenant": "acme"})
            server.hold = True
            task = asyncio.ensure_future(c.get(server.url, headers={"x-tenant": "acme"}))
            while not server.arrived.acquire(blocking=False):
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            server.release.set()

    asyncio.run(main())
    assert metric(http_bank, "api_client", "acme", "failures_total") == 1
    assert metric(http_bank, "api_client", "acme", "cancelled_total") == 1


def test_importing_breakerbank_imports_no_http_client() -> None:
    code = "import sys, breakerbank; print(sorted({'httpx', 'requests'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
