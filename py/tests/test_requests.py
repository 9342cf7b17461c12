"""breakerbank.requests against the real requests (and urllib3), talking to
a loopback server that fails on demand (tests/loopback.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from conftest import metric
from loopback import FlakyServer, refused_url

import breakerbank as bb
from breakerbank.requests import BreakerAdapter


def by_header(request: requests.PreparedRequest) -> str:
    return str(request.headers["x-tenant"])


def client(dep: bb.Dependency, **kw: object) -> requests.Session:
    s = requests.Session()
    s.trust_env = False  # no proxy from the environment between us and loopback
    s.mount("http://127.0.0.1", BreakerAdapter(dep, **{"tenant": by_header, **kw}))  # type: ignore[arg-type]
    return s


@pytest.fixture
def api(http_bank: bb.Bank) -> Iterator[requests.Session]:
    with client(http_bank["api_client"]) as s:
        yield s


def get(s: requests.Session, url: str, tenant: str, **kw: object) -> requests.Response:
    return s.get(url, headers={"x-tenant": tenant}, **kw)  # type: ignore[arg-type]


def test_5xx_trips_and_the_open_breaker_refuses_without_touching_the_server(
    http_bank: bb.Bank, api: requests.Session, server: FlakyServer
) -> None:
    server.status["acme"] = 503
    for _ in range(3):
        assert get(api, server.url, "acme").status_code == 503
    assert http_bank["api_client"].state(tenant="acme") == "open"
    with pytest.raises(bb.DependencyUnavailable) as err:
        get(api, server.url, "acme")
    assert server.hits["acme"] == 3
    assert err.value.code == "API_DOWN" and err.value.retry_after == pytest.approx(30.0)
    assert metric(http_bank, "api_client", "acme", "failures_total") == 3


def test_4xx_is_a_success_unless_classify_says_otherwise(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["api_client"]
    server.status["acme"] = 404
    server.status["globex"] = 429

    def throttled(result: object) -> str | None:
        if isinstance(result, requests.Response) and result.status_code == 429:
            return "failure"
        return None

    with client(dep, classify=throttled) as s:
        for _ in range(4):
            assert get(s, server.url, "acme").status_code == 404
        for _ in range(3):
            assert get(s, server.url, "globex").status_code == 429
    assert dep.state(tenant="acme") == "closed"
    assert dep.state(tenant="globex") == "open"
    assert server.hits == {"acme": 4, "globex": 3}


def test_connection_refused_counts_as_a_failure(http_bank: bb.Bank, api: requests.Session) -> None:
    url = refused_url()
    for _ in range(3):
        with pytest.raises(requests.ConnectionError):
            get(api, url, "acme")
    assert http_bank["api_client"].state(tenant="acme") == "open"
    with pytest.raises(bb.DependencyUnavailable):
        get(api, url, "acme")


def test_a_timeout_counts_as_a_failure(http_bank: bb.Bank, api: requests.Session, server: FlakyServer) -> None:
    server.hold = True  # no answer until released
    with pytest.raises(requests.Timeout):
        get(api, server.url, "acme", timeout=0.2)
    server.release.set()
    assert metric(http_bank, "api_client", "acme", "failures_total") == 1


def test_half_open_probes_close_the_breaker_or_reopen_it(
    http_bank: bb.Bank, clock: bb.ManualClock, api: requests.Session, server: FlakyServer
) -> None:  # C7
    dep = http_bank["api_client"]
    server.status["acme"] = 500
    for _ in range(3):
        get(api, server.url, "acme")
    clock.advance(30)
    assert get(api, server.url, "acme").status_code == 500
    assert dep.state(tenant="acme") == "open"
    del server.status["acme"]
    clock.advance(120)
    assert get(api, server.url, "acme").status_code == 200
    assert dep.state(tenant="acme") == "half_open"
    assert get(api, server.url, "acme").status_code == 200
    assert dep.state(tenant="acme") == "closed"
    assert server.hits["acme"] == 6


def test_an_error_mid_body_is_a_failure_and_a_stream_counts_its_status(
    http_bank: bb.Bank, api: requests.Session, server: FlakyServer
) -> None:
    server.truncate = True
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        get(api, server.url, "acme")  # a 200 whose body is cut short
    assert metric(http_bank, "api_client", "acme", "failures_total") == 1
    server.truncate = False
    server.status["acme"] = 503
    with get(api, server.url, "acme", stream=True) as r:
        # Streamed: recorded from the status, before the body is read.
        assert metric(http_bank, "api_client", "acme", "failures_total") == 2
        assert r.content.startswith(b"status 503")
    assert metric(http_bank, "api_client", "acme", "failures_total") == 2


def test_tenants_are_isolated(http_bank: bb.Bank, api: requests.Session, server: FlakyServer) -> None:  # C9
    dep = http_bank["api_client"]
    server.status["acme"] = 503
    for _ in range(5):
        for tenant in ("acme", "globex", "initech"):
            try:
                get(api, server.url, tenant)
            except bb.DependencyUnavailable:
                assert tenant == "acme"
    assert dep.state(tenant="acme") == "open"
    assert dep.state(tenant="globex") == dep.state(tenant="initech") == "closed"
    assert server.hits == {"acme": 3, "globex": 5, "initech": 5}


def test_a_degraded_fallback_returns_the_declared_response(http_bank: bb.Bank, server: FlakyServer) -> None:
    dep = http_bank["web_client"]
    server.default = 500

    def cached_page(request: requests.PreparedRequest) -> requests.Response:
        r = requests.Response()
        r.status_code, r._content, r.request = 200, b"degraded", request
        return r

    with client(dep, tenant=None, degraded=cached_page) as s:
        for _ in range(3):
            assert s.get(server.url).status_code == 500
        r = s.get(server.url)
    assert (r.status_code, r.content) == (200, b"degraded")
    assert server.total_hits == 3
    assert metric(http_bank, "web_client", "global", "fallback_degraded_total") == 1
