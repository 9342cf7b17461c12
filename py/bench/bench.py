"""breakerbank vs pybreaker, in one run (issue 6).

    make py-bench            # or: .venv/bin/python py/bench/bench.py [--quick]

Cases (per call, median of repeated timeit runs, nanoseconds):
  closed call       dep.call(f)                 vs breaker.call(f)
  closed call, tenant dep.call(f, tenant=...)  vs a dict of 100 pybreakers, one per tenant
  admit + success   d = dep.admit(); d.success() vs `with breaker.calling(): pass`
  open rejection    dep.call(f) raising DependencyUnavailable, caught
                    vs breaker.call(f) raising CircuitBreakerError, caught
  2 threads         total calls/s of 2 threads on one breaker vs 1 thread
The baseline `f()` is the cost of the call itself.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
import timeit
from collections.abc import Callable

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
"""


def f() -> int:
    return 1


# Per-call cases are timed on the benchmarking thread's CPU clock: on a
# shared machine, time spent descheduled is not the library's. (`--wall`
# switches to wall time.)
TIMER: Callable[[], float] = time.thread_time


def per_call_ns(stmt: str, env: dict[str, object], number: int, repeat: int) -> float:
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    ap.add_argument("--wall", action="store_true", help="time per-call cases on the wall clock")
    args = ap.parse_args()
    global TIMER
    if args.wall:
        TIMER = time.perf_counter
    number, repeat = (20_000, 5) if args.quick else (200_000, 15)
    per_thread = 20_000 if args.quick else 200_000

    bank = bb.Bank.from_yaml(PROFILE)
    dep = bank["payments_client"]
    tdep = bank["tenant_client"]
    tdep.call(f, tenant="tenant-7")
    breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)

    rows: list[tuple[str, float | None, float | None, str]] = []
    breakers = {f"tenant-{i}": pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600) for i in range(100)}
    env: dict[str, object] = {"f": f, "dep": dep, "tdep": tdep, "breaker": breaker, "breakers": breakers}
    base = per_call_ns("f()", env, number, repeat)
    rows.append(("baseline f()", base, base, "ns"))
    rows.append((
        "closed call",
        per_call_ns("dep.call(f)", env, number, repeat),
        per_call_ns("breaker.call(f)", env, number, repeat),
        "ns",
    ))
    rows.append((
        "closed call, tenant",
        per_call_ns("tdep.call(f, tenant='tenant-7')", env, number, repeat),
        per_call_ns("breakers['tenant-7'].call(f)", env, number, repeat),
        "ns",
    ))
    rows.append((
        "closed call_with, tenant",
        per_call_ns("tdep.call_with(f, tenant='tenant-7')", env, number, repeat),
        None,
        "ns",
    ))
    rows.append((
        "admit + success",
        per_call_ns("dep.admit().success()", env, number, repeat),
        per_call_ns("with breaker.calling(): pass", env, number, repeat),
        "ns",
    ))

    # Open: every call is rejected with the library's exception.
    odep = bb.Bank.from_yaml(PROFILE)["payments_client"]
    odep.force_open()
    obreaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    obreaker.open()
    n_open = number // 4

    def bb_open() -> None:
        for _ in range(n_open):
            try:
                odep.call(f)
            except bb.DependencyUnavailable:
                pass

    def pb_open() -> None:
        for _ in range(n_open):
            try:
                obreaker.call(f)
            except pybreaker.CircuitBreakerError:
                pass

    def empty_try() -> None:
        for _ in range(n_open):
            try:
                f()
            except ValueError:
                pass

    loop_base = loop_ns(empty_try, n_open, repeat)
    rows.append((
        "open rejection (+exception)",
        loop_ns(bb_open, n_open, repeat) - loop_base,
        loop_ns(pb_open, n_open, repeat) - loop_base,
        "ns",
    ))

    tbank = bb.Bank.from_yaml(PROFILE)["payments_client"]
    tbreaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    bb1 = threads_calls_per_s(tbank.call, 1, per_thread, 5)
    bb2 = threads_calls_per_s(tbank.call, 2, per_thread // 2, 5)
    pb1 = threads_calls_per_s(tbreaker.call, 1, per_thread, 5)
    pb2 = threads_calls_per_s(tbreaker.call, 2, per_thread // 2, 5)
    rows.append(("1 thread, calls/s", bb1, pb1, "/s"))
    rows.append(("2 threads, calls/s total", bb2, pb2, "/s"))

    print(f"python {platform.python_version()} ({sys.implementation.name}), "
          f"breakerbank {bb.__version__}, pybreaker {getattr(pybreaker, '__version__', '1.x')}, "
          f"{'quick' if args.quick else 'full'} run: median of {repeat} runs, per-call cases on "
          f"{'wall' if args.wall else 'thread CPU'} time, threads on wall time")
    print(f"{'case':30} {'breakerbank':>14} {'pybreaker':>14} {'ratio':>7}")
    for name, ours, theirs, unit in rows:
        def fmt(v: float | None) -> str:
            if v is None:
                return "-"
            return f"{v:,.0f} ns" if unit == "ns" else f"{v / 1e6:,.2f} M/s"

        ratio = ""
        if ours and theirs and name != "baseline f()":
            ratio = f"{theirs / ours:.1f}x" if unit == "ns" else f"{ours / theirs:.1f}x"
        print(f"{name:30} {fmt(ours):>14} {fmt(theirs):>14} {ratio:>7}")
    print(f"2 threads / 1 thread: breakerbank {bb2 / bb1:.2f}, pybreaker {pb2 / pb1:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
