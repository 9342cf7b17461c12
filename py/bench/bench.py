"""breakerbank vs the pure-Python breakers, side by side in one run.

    make py-bench            # or: .venv/bin/python py/bench/bench.py [--quick]

Peers: pybreaker, circuitbreaker (the fastest pure-Python breaker on PyPI;
its breakers are used as decorators, the form that checks the state) and
aiobreaker (asyncio only). Cases (per call, median of repeated runs, ns):
  closed call          dep.call(f)                  breaker.call(f), cb_f()
  closed call, tenant  dep.call(f, tenant=...)      a dict of 100 breakers, one per tenant
  with admit           with dep.admit(): pass       with breaker.calling(): pass
                       (circuitbreaker's `with` never checks the state, only
                       its decorator does: not the same work, left out)
  baseline with        with lock: pass (a lock made once), with threading.Lock():
                       pass (one made per use, as admit() makes a Decision), and
                       with decided: pass (one Decision made once: the statement
                       over our type, with no admission): what a `with` costs
                       before any breaker work
  open rejection       dep.call(f) raising DependencyUnavailable, caught, vs each
                       peer's CircuitBreakerError, caught
  open, fallback       dep.call(f, fallback=f) on a `degraded` dependency vs
                       circuitbreaker's fallback_function
  async closed / open  await dep.acall(g) vs circuitbreaker's async decorator
                       and aiobreaker's call_async
  1 / 2 threads        total calls/s of threads calling one breaker
The baseline `f()` is the cost of the call itself; "x best peer" is the
fastest peer's time over breakerbank's (for calls/s, ours over theirs).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import threading
import time
import timeit
from collections.abc import Awaitable, Callable
from datetime import timedelta
from importlib.metadata import version

import aiobreaker
import circuitbreaker
import pybreaker

import breakerbank as bb

PROFILE = """
dependencies:
  payments_client:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 1h
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 2h
  tenant_client:
    isolation: tenant
    trip: {consecutive_failures: 5}
    open_duration: 1h
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: TENANT_UNAVAILABLE}
    recovery_bound: 2h
  degraded_client:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 1h
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 2h
"""

def f() -> int:
    return 1


async def g() -> int:
    return 1


def boom() -> None:
    raise RuntimeError("down")


# Per-call cases are timed on the benchmarking thread's CPU clock: on a
# shared machine, time spent descheduled is not the library's. (`--wall`
# switches to wall time.)
TIMER: Callable[[], float] = time.thread_time


def per_call_ns(stmt: str | Callable[[], object], env: dict[str, object], number: int, repeat: int) -> float:
    """Median over `repeat` runs of the per-call time of `stmt`, in ns."""
    runs = timeit.repeat(stmt, globals=env, number=number, repeat=repeat, timer=TIMER)
    return statistics.median(runs) / number * 1e9


def loop_ns(body: Callable[[], object], number: int, repeat: int) -> float:
    """Like per_call_ns, for bodies that must run in a Python loop (try/except)."""

    def run() -> float:
        t0 = TIMER()
        body()
        return TIMER() - t0

    return statistics.median(run() for _ in range(repeat)) / number * 1e9


def threads_calls_per_s(call: Callable[[Callable[[], int]], object], threads: int, per_thread: int,
                        repeat: int) -> float:
    """Total calls/s of `threads` threads each making `per_thread` calls `call(f)`."""

    def one_run() -> float:
        barrier = threading.Barrier(threads + 1)

        def worker() -> None:
            c, fn = call, f
            barrier.wait()
            for _ in range(per_thread):
                c(fn)

        ts = [threading.Thread(target=worker) for _ in range(threads)]
        for t in ts:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        return threads * per_thread / (time.perf_counter() - t0)

    return statistics.median(one_run() for _ in range(repeat))


def async_ns(body: Callable[[], Awaitable[None]], number: int, repeat: int) -> float:
    """Like loop_ns, for a coroutine making `number` awaits in one event loop."""

    async def run() -> float:
        t0 = TIMER()
        await body()
        return TIMER() - t0

    return statistics.median(asyncio.run(run()) for _ in range(repeat)) / number * 1e9


def cb_breaker(**kw: object) -> circuitbreaker.CircuitBreaker:
    return circuitbreaker.CircuitBreaker(failure_threshold=5, recovery_timeout=3600, **kw)


def cb_open(breaker: circuitbreaker.CircuitBreaker) -> None:
    failing = breaker(boom)
    for _ in range(5):
        try:
            failing()
        except RuntimeError:
            pass
    assert breaker.opened


Row = tuple[str, float | None, float | None, float | None, float | None, str]
PEERS = ("pybreaker", "circuitbreaker", "aiobreaker")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    ap.add_argument("--wall", action="store_true", help="time per-call cases on the wall clock")
    args = ap.parse_args()
    global TIMER
    if args.wall:
        TIMER = time.perf_counter
    number, repeat = (20_000, 5) if args.quick else (200_000, 11)
    per_thread = 20_000 if args.quick else 200_000
    n_loop = number // 4

    bank = bb.Bank.from_yaml(PROFILE)
    dep = bank["payments_client"]
    tdep = bank["tenant_client"]
    tdep.call(f, tenant="tenant-7")
    breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    breakers = {f"tenant-{i}": pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600) for i in range(100)}
    cb = cb_breaker()
    cb_f = cb(f)
    cb_fs = {f"tenant-{i}": cb_breaker()(f) for i in range(100)}
    env: dict[str, object] = {
        "f": f, "dep": dep, "tdep": tdep, "breaker": breaker, "breakers": breakers, "cb_f": cb_f,
        "cb_fs": cb_fs,
    }

    def ns(stmt: str | None) -> float | None:
        return None if stmt is None else per_call_ns(stmt, env, number, repeat)

    rows: list[Row] = []
    base = ns("f()")
    rows.append(("baseline f()", base, base, base, None, "ns"))
    rows.append(("closed call", ns("dep.call(f)"), ns("breaker.call(f)"), ns("cb_f()"), None, "ns"))
    rows.append((
        "closed call, tenant",
        ns("tdep.call(f, tenant='tenant-7')"),
        ns("breakers['tenant-7'].call(f)"),
        ns("cb_fs['tenant-7']()"),
        None,
        "ns",
    ))
    rows.append(("closed call_with, tenant", ns("tdep.call_with(f, tenant='tenant-7')"), None, None, None, "ns"))
    rows.append((
        "with admit(): pass",
        ns("with dep.admit(): pass"),
        ns("with breaker.calling(): pass"),
        None,
        None,
        "ns",
    ))
    rows.append(("admit().success()", ns("dep.admit().success()"), None, None, None, "ns"))
    # What any `with` costs: the statement binds `__enter__` and `__exit__`
    # to the object and calls both, whatever they do.
    env.update(lock=threading.Lock(), threading=threading)
    with_lock = ns("with lock: pass")
    rows.append(("baseline with lock: pass", with_lock, with_lock, with_lock, None, "ns"))
    with_new_lock = ns("with threading.Lock(): pass")
    rows.append(("baseline with Lock(): pass", with_new_lock, with_new_lock, with_new_lock, None, "ns"))
    # The statement over a Decision admitted once (its permit recorded by
    # the first exit; the later ones record nothing): no admission.
    env.update(decided=dep.admit())
    rows.append(("baseline with decided: pass", ns("with decided: pass"), None, None, None, "ns"))

    # Open (ours tripped, open for the profile's hour, as failures leave it;
    # not forced open, whose refusal is cheaper): every call is rejected with
    # the library's exception.
    odep = bb.Bank.from_yaml(PROFILE)["payments_client"]
    odep.trip()
    obreaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    obreaker.open()
    ocb = cb_breaker()
    cb_open(ocb)
    ocb_f = ocb(f)

    def rejected(call: Callable[[], object], exc: type[BaseException]) -> Callable[[], None]:
        def body() -> None:
            for _ in range(n_loop):
                try:
                    call()
                except exc:
                    pass

        return body

    loop_base = loop_ns(rejected(f, ValueError), n_loop, repeat)

    def open_ns(call: Callable[[], object], exc: type[BaseException]) -> float:
        return loop_ns(rejected(call, exc), n_loop, repeat) - loop_base

    rows.append((
        "open rejection (+exception)",
        open_ns(lambda: odep.call(f), bb.DependencyUnavailable),
        open_ns(lambda: obreaker.call(f), pybreaker.CircuitBreakerError),
        open_ns(ocb_f, circuitbreaker.CircuitBreakerError),
        None,
        "ns",
    ))
    gdep = bb.Bank.from_yaml(PROFILE)["degraded_client"]
    gdep.trip()
    gcb = cb_breaker(fallback_function=f)
    cb_open(gcb)
    env.update(gdep=gdep, gcb_f=gcb(f))
    rows.append(("open, fallback= callable", ns("gdep.call(f, fallback=f)"), None, ns("gcb_f()"), None, "ns"))

    # asyncio: `number // 4` awaits in one event loop, minus the loop awaiting g() alone.
    abreaker = aiobreaker.CircuitBreaker(fail_max=5, timeout_duration=timedelta(hours=1))
    acb_g = cb_breaker()(g)

    def awaits(call: Callable[[], Awaitable[object]], exc: type[BaseException] = ValueError) -> float:
        async def body() -> None:
            for _ in range(n_loop):
                try:
                    await call()
                except exc:
                    pass

        return async_ns(body, n_loop, repeat)

    abase = awaits(g)
    rows.append(("async baseline await g()", abase, None, abase, abase, "ns"))
    rows.append((
        "async closed call",
        awaits(lambda: dep.acall(g)) - abase,
        None,
        awaits(acb_g) - abase,
        awaits(lambda: abreaker.call_async(g)) - abase,
        "ns",
    ))
    oabreaker = aiobreaker.CircuitBreaker(fail_max=5, timeout_duration=timedelta(hours=1))
    oabreaker.open()
    oacb = cb_breaker()
    cb_open(oacb)
    oacb_g = oacb(g)
    rows.append((
        "async open rejection (+exc.)",
        awaits(lambda: odep.acall(g), bb.DependencyUnavailable) - abase,
        None,
        awaits(oacb_g, circuitbreaker.CircuitBreakerError) - abase,
        awaits(lambda: oabreaker.call_async(g), aiobreaker.CircuitBreakerError) - abase,
        "ns",
    ))

    # Threads: calls on one breaker each.
    tdep1 = bb.Bank.from_yaml(PROFILE)["payments_client"]
    tpb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    tcb = cb_breaker()
    tcb_call = tcb.decorate

    def cb_call(fn: Callable[[], int], _w: dict[object, Callable[[], int]] = {}) -> int:  # noqa: B006
        w = _w.get(fn)
        if w is None:
            w = _w[fn] = tcb_call(fn)
        return w()

    results: dict[str, tuple[float, float]] = {}
    for name, call in (("breakerbank", tdep1.call), ("pybreaker", tpb.call), ("circuitbreaker", cb_call)):
        one = threads_calls_per_s(call, 1, per_thread, 5)
        two = threads_calls_per_s(call, 2, per_thread // 2, 5)
        results[name] = (one, two)
    for i, label in enumerate(("1 thread, calls/s", "2 threads, calls/s total")):
        rows.append((label, results["breakerbank"][i], results["pybreaker"][i], results["circuitbreaker"][i],
                     None, "/s"))

    versions = ", ".join(f"{p} {version(p)}" for p in PEERS)
    print(f"python {platform.python_version()} ({sys.implementation.name}), "
          f"breakerbank {bb.__version__}, {versions}, "
          f"{'quick' if args.quick else 'full'} run: median of {repeat} runs, per-call cases on "
          f"{'wall' if args.wall else 'thread CPU'} time, threads on wall time")
    print(f"{'case':30} {'breakerbank':>12} {'pybreaker':>12} {'circuitbreaker':>14} {'aiobreaker':>12} "
          f"{'x best peer':>11}")

    def fmt(v: float | None, unit: str) -> str:
        if v is None:
            return "-"
        return f"{v:,.0f} ns" if unit == "ns" else f"{v / 1e6:,.2f} M/s"

    for name, ours, *theirs, unit in rows:
        peers = [t for t in theirs if t]
        ratio = ""
        if ours and peers and "baseline" not in name:
            ratio = f"{min(peers) / ours:.1f}x" if unit == "ns" else f"{ours / max(peers):.1f}x"
        cells = [fmt(v, unit) for v in (ours, *theirs)]
        print(f"{name:30} {cells[0]:>12} {cells[1]:>12} {cells[2]:>14} {cells[3]:>12} {ratio:>11}")
    for name, (one, two) in results.items():
        print(f"2 threads / 1 thread: {name} {two / one:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
