"""What the HTTP integrations add per request (issue 26), in one run.

    make py-bench            # or: .venv/bin/python py/bench/http_bench.py [--quick]

One request through a transport (send, read, close) that answers in
process (``httpx.MockTransport``, httpx's own transport for answering
without a network), bare and wrapped in
``breakerbank.httpx.BreakerTransport``, closed global and per tenant; and
one through a requests adapter that answers in process, bare and as a
``BreakerAdapter`` over it. Per request, median of repeated runs timed
as ``bench.py`` times (its ``per_call_ns``: the thread's CPU time); the rows that matter are the differences (the goal: at most 2 µs over
the bare transport). Rows alternate bare and wrapped, so a slow patch of
the host falls on both.
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import sys
from collections.abc import Callable

import httpx
import requests
from requests.adapters import HTTPAdapter

import breakerbank as bb
from bench import per_call_ns  # the Python bench's timing: thread CPU time
from breakerbank.httpx import BreakerTransport
from breakerbank.requests import BreakerAdapter

PROFILE = """
dependencies:
  api:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 1h
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: API_DOWN}
    recovery_bound: 2h
  tenant_api:
    isolation: tenant
    trip: {consecutive_failures: 5}
    open_duration: 1h
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: API_DOWN}
    recovery_bound: 2h
"""


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"ok")


class InProcessAdapter(HTTPAdapter):
    """A requests adapter that answers 200 without a connection."""

    def send(self, request: requests.PreparedRequest, **kwargs: object) -> requests.Response:
        r = requests.Response()
        r.status_code = 200
        r._content = b"ok"
        r.raw = io.BytesIO(b"ok")
        r.request = request
        r.url = request.url or ""
        return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    number, repeat = (500, 5) if args.quick else (3000, 15)

    bank = bb.Bank.from_yaml(PROFILE)
    api, tenant_api = bank["api"], bank["tenant_api"]
    url = "http://api.local/v1/item"

    inner = httpx.MockTransport(ok)
    wrapped = BreakerTransport(api, transport=inner)
    per_tenant = BreakerTransport(tenant_api, tenant=lambda r: r.headers["x-tenant"], transport=inner)
    request = httpx.Request("GET", url, headers={"x-tenant": "acme"})

    def through(transport: httpx.BaseTransport) -> Callable[[], object]:
        def one() -> object:
            r = transport.handle_request(request)
            r.read()
            r.close()
            return r

        return one

    class InProcessBreakerAdapter(BreakerAdapter, InProcessAdapter):
        """BreakerAdapter over the in-process answer (its super().send)."""

    prepared = requests.Request("GET", url).prepare()
    bare_adapter, breaker_adapter = InProcessAdapter(), InProcessBreakerAdapter(api)

    def sent(adapter: HTTPAdapter) -> Callable[[], object]:
        def one() -> object:
            r = adapter.send(prepared)
            r.close()
            return r

        return one

    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("httpx, global", through(inner), through(wrapped)),
        ("httpx, tenant", through(inner), through(per_tenant)),
        ("requests, global", sent(bare_adapter), sent(breaker_adapter)),
    ]
    print(f"Python {platform.python_version()} on {platform.machine()}; "
          f"{number} requests x {repeat} runs, per request, medians")
    print(f"{'case':<16} {'bare':>10} {'breaker':>10} {'added':>10}")
    for name, b, w in cases:
        b(), w()  # warm
        rb: list[float] = []
        rw: list[float] = []
        for _ in range(repeat):
            rb.append(per_call_ns(b, {}, number, 1))
            rw.append(per_call_ns(w, {}, number, 1))
        mb, mw = statistics.median(rb), statistics.median(rw)
        print(f"{name:<16} {mb / 1000:>8.2f}µs {mw / 1000:>8.2f}µs {(mw - mb) / 1000:>8.2f}µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
