"""Running a scenario on virtual time through the real core.

:func:`simulate` builds a bank from the scenario's profile on a
:class:`~breakerbank.ManualClock` and drives it. While a partition is
healthy and no fault is near, its calls are tallied in bulk and only one
real admission per ``sample`` goes through the core (keeping it warm); from
``tick`` before a fault window (a whole rolling ``window`` before, for
failure-rate policies) until the partition is closed again after it, every
call is a real admission and a real outcome recorded through the core, in
time order. Breaker state, partition names and the trip window come from
the core only; the outcome of an injected fault is the scenario's.
"""

from __future__ import annotations

import heapq
import random
import time
from typing import IO

from ._native import Bank, DeadlineExpired, Decision, Dependency, DependencyUnavailable, ManualClock
from .report import PartitionReport, Report, format_duration
from .scenario import Fault, Scenario

__all__ = ["simulate"]


class _Stream:
    """The calls of one tenant to one dependency."""

    __slots__ = ("dep", "name", "tenant", "partition", "rate", "acc", "phase", "report", "faults")

    def __init__(self, dep: Dependency, tenant: str | None, partition: str, rate: float,
                 phase: float, report: PartitionReport, faults: list[Fault]) -> None:
        self.dep = dep
        self.name = dep.name
        self.tenant = tenant
        self.partition = partition
        self.rate = rate
        self.acc = 0.0
        self.phase = phase
        self.report = report
        self.faults = faults

    def count(self, dt: float) -> int:
        self.acc += self.rate * dt
        n = int(self.acc)
        self.acc -= n
        return n


class _Progress:
    def __init__(self, total: float, out: IO[str] | None) -> None:
        self.total = total
        self.out = out
        self.last = -1

    def update(self, t: float) -> None:
        if self.out is None:
            return
        pct = int(100 * t / self.total) if self.total else 100
        if pct == self.last:
            return
        self.last = pct
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        self.out.write(f"\rsimulating [{bar}] {pct:3d}% {format_duration(t)}/{format_duration(self.total)}")
        self.out.flush()

    def done(self) -> None:
        if self.out is not None:
            self.update(self.total)
            self.out.write("\n")
            self.out.flush()


def _degraded() -> str:
    return "degraded"


def _hot_windows(s: Scenario, bank: Bank) -> dict[tuple[str, str | None], list[tuple[float, float]]]:
    """Per (dependency, fault tenant) the time ranges where every call is driven."""
    out: dict[tuple[str, str | None], list[tuple[float, float]]] = {}
    for f in s.faults:
        window = bank[f.dependency].window or 0.0  # a failure-rate policy's rolling window
        lead = window + s.tick
        tail = window + f.latency + (s.timeout or 0.0) + s.tick
        out.setdefault((f.dependency, f.tenant), []).append((f.start - lead, f.end + tail))
    return out


def simulate(s: Scenario, progress: IO[str] | None = None, bank: Bank | None = None) -> Report:
    """Runs the scenario on virtual time through the real core.

    On a bank of its own, made from the scenario's profile; or on `bank`
    (made on a :class:`~breakerbank.ManualClock`, which the run advances by
    the scenario's duration), with times counted from the clock's time when
    the run starts and state changes judged from the states it finds.
    """
    wall0 = time.perf_counter()
    rng = random.Random(s.seed)
    if bank is None:
        clock = ManualClock()
        bank = Bank.from_yaml(s.profile_text, clock=clock)
    elif bank.clock is None:
        raise ValueError("simulate drives the bank's clock: make the bank with clock=ManualClock()")
    else:
        clock = bank.clock
    initial = {
        (d, p): m["state"] for d, parts in bank.metrics().items() for p, m in parts.items() if p != "*"
    }
    now = 0.0

    def advance_to(t: float) -> None:
        nonlocal now
        if t > now:
            clock.advance(t - now)
            now = t

    isolation: dict[str, str] = {d: bank[d].isolation for d in bank.dependencies}
    reports: dict[str, dict[str, PartitionReport]] = {d: {} for d in bank.dependencies}
    hot = _hot_windows(s, bank)
    # Named by the core before any call, so every tenant names its own partition.
    faulted_deps = {f.dependency for f in s.faults if f.tenant is None}
    faulted_parts = {(f.dependency, bank[f.dependency].breaker_of(f.tenant)) for f in s.faults if f.tenant is not None}

    def faulted(dep: str, partition: str) -> bool:
        return dep in faulted_deps or (dep, partition) in faulted_parts

    def report_for(dep: str, partition: str) -> PartitionReport:
        r = reports[dep].get(partition)
        if r is None:
            r = reports[dep][partition] = PartitionReport(
                dep, partition, faulted(dep, partition), [(0.0, initial.get((dep, partition), "closed"))]
            )
        return r

    # Streams and the windows during which each partition is driven call by call.
    streams: list[_Stream] = []
    part_windows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for name in bank.dependencies:
        dep = bank[name]
        rate = s.rates.get(name, 0.0)
        if rate <= 0:
            continue
        callers: list[str | None] = list(s.tenants) if s.tenants else [None]
        for tenant in callers:
            partition = dep.breaker_of(tenant)
            faults = [f for f in s.faults if f.dependency == name and (f.tenant is None or f.tenant == tenant)]
            streams.append(_Stream(dep, tenant, partition, rate / len(callers), rng.random(),
                                   report_for(name, partition), faults))
        for (fdep, ftenant), wins in hot.items():
            if fdep != name:
                continue
            covered = callers if ftenant is None else [ftenant]
            keys = list(dict.fromkeys(dep.breaker_of(t) for t in covered))
            for k in keys:
                part_windows.setdefault((name, k), []).extend(wins)

    # Partitions (dependency, partition) with their streams, for bulk tallies.
    groups: dict[tuple[str, str], list[_Stream]] = {}
    for st in streams:
        groups.setdefault((st.name, st.partition), []).append(st)
    cold_rate = {key: sum(st.rate for st in sts) for key, sts in groups.items()}
    cold_acc = dict.fromkeys(groups, 0.0)

    unsettled: set[tuple[str, str]] = set()
    pending_by_part: dict[tuple[str, str], int] = {}
    pending: list[tuple[float, int, _Stream, Decision, str]] = []
    seq = 0
    real_admissions = 0
    total_calls = 0

    def is_hot(key: tuple[str, str], t0: float, t1: float) -> bool:
        if key in unsettled or pending_by_part.get(key):
            return True
        for a, b in part_windows.get(key, ()):
            if a < t1 and t0 < b:
                return True
        return False

    def observe(st: _Stream) -> None:
        state = st.dep.state(tenant=st.tenant)
        tl = st.report.timeline
        key = (st.name, st.partition)
        if state != tl[-1][1]:
            tl.append((now, state))
        if state != "closed":
            unsettled.add(key)
        elif not pending_by_part.get(key):
            unsettled.discard(key)

    def complete(item: tuple[float, int, _Stream, Decision, str]) -> None:
        _, _, st, d, outcome = item
        key = (st.name, st.partition)
        pending_by_part[key] -= 1
        if outcome == "timeout":  # the caller's own timeout, no deadline: the core's rule says failure
            d.finish(TimeoutError(f"{st.name} took longer than the scenario's timeout"))
        else:
            d._returned("value", None)
        observe(st)

    def serve(st: _Stream, d: Decision) -> None:
        try:
            d.serve_fallback(_degraded, None, None, None)
        except (DependencyUnavailable, DeadlineExpired):
            pass

    def one_call(st: _Stream, t: float) -> None:
        nonlocal seq, real_admissions
        d = st.dep.admit(tenant=st.tenant)
        real_admissions += 1
        st.report.real_calls += 1
        if not d.admitted:
            serve(st, d)
            observe(st)
            return
        fault = next((f for f in st.faults if f.start <= t < f.end), None)
        if d.probe:
            st.report.probes += 1
            if fault is not None:
                st.report.probes_in_fault += 1
            observe(st)  # half-open, even if the probe's outcome reopens it at once
        if fault is None:
            d._returned("value", None)
        elif fault.kind == "error":
            if fault.error_rate >= 1.0 or rng.random() < fault.error_rate:
                st.report.failures_injected += 1
                d.failure()
            else:
                d._returned("value", None)
        else:  # latency: the outcome comes later, on the clock
            if s.timeout is not None and fault.latency >= s.timeout:
                done_at, outcome = t + s.timeout, "timeout"  # the client gave up
                st.report.failures_injected += 1
            else:
                done_at, outcome = t + fault.latency, "returned"
            seq += 1
            heapq.heappush(pending, (done_at, seq, st, d, outcome))
            key = (st.name, st.partition)
            pending_by_part[key] = pending_by_part.get(key, 0) + 1
        observe(st)

    bar = _Progress(s.duration, progress)
    next_sample = 0.0
    t = 0.0
    while t < s.duration:
        bar.update(t)
        # Real admissions for healthy partitions, once per `sample`.
        sampling = t >= next_sample
        if sampling:
            while next_sample <= t:
                next_sample += s.sample
        t_next = min(t + s.tick, s.duration)
        hot_order = [key for key in groups if is_hot(key, t, t_next)]  # deterministic order
        hot_keys = set(hot_order)
        if not hot_keys and not pending:
            # Nothing can change state: jump to the next sample or hot window.
            t_next = min(next_sample, s.duration)
            for wins in part_windows.values():
                for a, _ in wins:
                    if t < a < t_next:
                        t_next = a
            t_next = max(t_next, min(t + s.tick, s.duration))
        advance_to(t)
        for key, sts in groups.items():
            if key in hot_keys:
                continue
            acc = cold_acc[key] + cold_rate[key] * (t_next - t)
            n = int(acc)
            cold_acc[key] = acc - n
            first = sts[0]
            first.report.calls += n
            total_calls += n
            if sampling:
                # One real, healthy call through the core keeps the partition warm.
                d = first.dep.admit(tenant=first.tenant)
                real_admissions += 1
                first.report.real_calls += 1
                if d.admitted:
                    d._returned("value", None)
                else:  # cannot happen for a settled partition; handle it anyway
                    serve(first, d)
                    observe(first)
        hot_streams = [st for key in hot_order for st in groups[key]]
        # Hot partitions: every call, in time order, interleaved with completions.
        events: list[tuple[float, int, _Stream]] = []
        for i, st in enumerate(hot_streams):
            n = st.count(t_next - t)
            st.report.calls += n
            total_calls += n
            dt = (t_next - t) / n if n else 0.0
            for j in range(n):
                events.append((t + (j + st.phase) * dt, i, st))
        events.sort(key=lambda e: (e[0], e[1]))
        for at, _, st in events:
            while pending and pending[0][0] <= at:
                item = heapq.heappop(pending)
                advance_to(item[0])
                complete(item)
            advance_to(at)
            one_call(st, at)
        while pending and pending[0][0] <= t_next:
            item = heapq.heappop(pending)
            advance_to(item[0])
            complete(item)
        t = t_next
    advance_to(s.duration)
    bar.done()

    snapshot = bank.metrics()
    for dep_name, parts in snapshot.items():
        for partition, m in parts.items():
            if partition == "*":  # the dependency as a whole, not a partition
                continue
            r = report_for(dep_name, partition)
            r.metrics = dict(m)
            if m["state"] != r.timeline[-1][1]:
                r.timeline.append((now, m["state"]))
    return Report(
        scenario=s,
        partitions=reports,
        isolation=isolation,
        wall_seconds=time.perf_counter() - wall0,
        real_admissions=real_admissions,
        calls=total_calls,
    )
