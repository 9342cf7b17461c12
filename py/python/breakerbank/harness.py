"""Fault-injection harness: check a profile, simulate a scenario.

``python -m breakerbank check PROFILE`` loads a profile through the core and
lists every problem. ``python -m breakerbank simulate SCENARIO`` drives the
real core on virtual time (a :class:`~breakerbank.ManualClock`) through a
YAML scenario and reports, per dependency and partition, the time open,
probe rejects, fallback use by kind and *false global trips* (partitions
other than the faulted ones that changed state; CONTRACT.md "Verification").

Scenario format (durations are ``250ms``, ``30s``, ``5m``, ``1h`` or seconds)::

    name: single tenant fault       # optional
    duration: 10m                   # virtual time simulated
    tenants: 20                     # a count (tenant-01, ...) or a list of ids
    rate: 200                       # calls/s per dependency, over all tenants
    traffic:                        # optional, per dependency: {rate: N}
      email_client: {rate: 50}
    tick: 100ms                     # optional: time step while faults matter
    sample: 1s                      # optional: cadence of real calls when healthy
    seed: 1                         # optional: for error_rate < 1
    profile:                        # the profile inline, or a file path
      dependencies: {...}
    faults:
      - dependency: payments_client
        tenant: tenant-07           # omit: every tenant / the global partition
        start: 2m
        duration: 2m                # or end: 4m
        kind: error                 # error | latency
        error_rate: 1.0             # error: fraction of calls failing
        latency: 3s                 # latency: how long each call takes
    timeout: 2s                     # optional: callers give up (a failure) after this

Simulation: while a partition is healthy and no fault is near, its calls are
tallied in bulk and only one real admission per ``sample`` goes through the
core (keeping it warm); from ``tick`` before a fault window (a whole rolling
``window`` before, for failure-rate policies) until the partition is closed
again after it, every call is a real admission and a real outcome recorded
through the core, in time order. Breaker state comes from the core only.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from ._native import Bank, ConfigError, Decision, DeadlineExpired, Dependency, DependencyUnavailable, ManualClock

__all__ = [
    "Fault",
    "Report",
    "Scenario",
    "ScenarioError",
    "check_profile",
    "format_report",
    "load_scenario",
    "parse_duration",
    "plot_report",
    "simulate",
    "write_json",
]

class ScenarioError(ValueError):
    """A scenario file is invalid; ``problems`` lists every problem found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid scenario: " + "; ".join(self.problems))


# --- YAML and durations ------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys instead of keeping the last."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|min|h)?\s*$")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(value: object, what: str = "duration") -> float:
    """Seconds from ``"250ms"``, ``"30s"``, ``"5m"``, ``"1h"`` or a number."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a duration like 30s, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _UNIT[m.group(2) or "s"]
    else:
        raise ValueError(f"{what}: expected a duration like 250ms, 30s, 5m or 1h, got {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what}: must be a finite duration >= 0, got {value!r}")
    return seconds


def _fmt_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        m, s = divmod(seconds, 60)
        return f"{int(m)}m{s:04.1f}s"
    h, rest = divmod(seconds, 3600)
    return f"{int(h)}h{int(rest // 60):02d}m"


# --- check -------------------------------------------------------------------------------


def check_profile(path: str | Path) -> list[str]:
    """Every problem of the profile at ``path`` (empty when it is valid)."""
    try:
        Bank.load(path, clock=ManualClock())
    except ConfigError as e:
        return list(e.problems or [str(e)])
    except OSError as e:
        return [str(e)]
    return []


# --- scenario ------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One fault window on a dependency (all partitions, or one tenant's)."""

    dependency: str
    tenant: str | None
    start: float
    end: float
    kind: str = "error"
    error_rate: float = 1.0
    latency: float = 0.0

    def covers(self, tenant: str | None, t: float) -> bool:
        return self.start <= t < self.end and (self.tenant is None or self.tenant == tenant)


@dataclass
class Scenario:
    """A parsed, validated scenario."""

    name: str
    duration: float
    tenants: list[str]
    rates: dict[str, float]
    faults: list[Fault]
    profile_text: str
    tick: float = 0.1
    sample: float = 1.0
    seed: int = 0
    timeout: float | None = None
    source: str = ""


_SCENARIO_KEYS = {
    "name", "duration", "tenants", "rate", "traffic", "tick", "sample", "seed",
    "profile", "faults", "timeout",
}
_FAULT_KEYS = {"dependency", "tenant", "start", "duration", "end", "kind", "error_rate", "latency"}


def load_scenario(path: str | Path) -> Scenario:
    """Reads and validates a scenario file; raises ScenarioError listing every problem."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except OSError as e:
        raise ScenarioError([f"cannot read scenario `{path}`: {e}"]) from e
    except yaml.YAMLError as e:
        raise ScenarioError([f"`{path}` is not valid YAML: {e}"]) from e
    return parse_scenario(raw, base=path.parent, source=str(path))


def parse_scenario(raw: object, base: Path = Path("."), source: str = "") -> Scenario:
    """Validates a scenario given as a mapping (see the module docs)."""
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        raise ScenarioError(["a scenario is a YAML mapping (see `python -m breakerbank --help`)"])
    for key in sorted(set(raw) - _SCENARIO_KEYS):
        problems.append(f"unknown field `{key}` (known: {', '.join(sorted(_SCENARIO_KEYS))})")

    def duration(key: str, default: float | None = None, positive: bool = True) -> float:
        if key not in raw:
            if default is None:
                problems.append(f"field `{key}` is required")
                return 1.0
            return default
        try:
            v = parse_duration(raw[key], f"`{key}`")
        except ValueError as e:
            problems.append(str(e))
            return 1.0
        if positive and v <= 0:
            problems.append(f"`{key}` must be > 0")
            return 1.0
        return v

    total = duration("duration")
    tick = duration("tick", 0.1)
    sample = duration("sample", 1.0)
    timeout = duration("timeout") if "timeout" in raw else None

    # profile
    profile_text = ""
    prof = raw.get("profile")
    if prof is None:
        problems.append("field `profile` is required: the profile inline, or a path to it")
    elif isinstance(prof, str):
        ppath = (base / prof) if not Path(prof).is_absolute() else Path(prof)
        try:
            profile_text = ppath.read_text(encoding="utf-8")
        except OSError as e:
            problems.append(f"`profile`: cannot read `{ppath}`: {e}")
    elif isinstance(prof, Mapping):
        profile_text = yaml.safe_dump(dict(prof), sort_keys=False)
    else:
        problems.append("`profile` must be a mapping (the profile inline) or a file path")
    bank: Bank | None = None
    if profile_text:
        try:
            bank = Bank.from_yaml(profile_text, clock=ManualClock())
        except ConfigError as e:
            problems.extend(f"profile: {p}" for p in (e.problems or [str(e)]))

    # tenants
    tenants_raw = raw.get("tenants", [])
    tenants: list[str] = []
    if isinstance(tenants_raw, bool):
        problems.append("`tenants` must be a count or a list of tenant ids")
    elif isinstance(tenants_raw, int):
        if tenants_raw < 0:
            problems.append("`tenants` must be >= 0")
        width = max(2, len(str(tenants_raw)))
        tenants = [f"tenant-{i:0{width}d}" for i in range(1, tenants_raw + 1)]
    elif isinstance(tenants_raw, list) and all(isinstance(t, (str, int)) for t in tenants_raw):
        tenants = [str(t) for t in tenants_raw]
        dupes = sorted({t for t in tenants if tenants.count(t) > 1})
        if dupes:
            problems.append(f"`tenants` lists {', '.join(dupes)} more than once")
        if "" in tenants:
            problems.append("`tenants`: a tenant id cannot be empty")
    else:
        problems.append("`tenants` must be a count or a list of tenant ids")

    # rates
    rates: dict[str, float] = {}

    def rate_of(v: object, what: str) -> float | None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            problems.append(f"{what} must be a number of calls per second >= 0, got {v!r}")
            return None
        return float(v)

    default_rate = rate_of(raw["rate"], "`rate`") if "rate" in raw else None
    traffic = raw.get("traffic", {}) or {}
    if not isinstance(traffic, Mapping):
        problems.append("`traffic` must map dependency names to {rate: N}")
        traffic = {}
    if bank is not None:
        for name in bank.dependencies:
            r = default_rate
            t = traffic.get(name)
            if t is not None:
                if not isinstance(t, Mapping) or set(t) - {"rate"}:
                    problems.append(f"`traffic.{name}` must be {{rate: N}}")
                elif "rate" in t:
                    r = rate_of(t["rate"], f"`traffic.{name}.rate`")
            if r is None and "rate" not in raw and t is None:
                problems.append(f"no call rate for `{name}`: set `rate` or `traffic.{name}.rate`")
            rates[name] = r or 0.0
            if bank[name].isolation == "tenant" and not tenants and rates[name] > 0:
                problems.append(f"`{name}` is tenant-scoped: the scenario needs `tenants`")
        for name in traffic:
            if name not in bank:
                problems.append(f"`traffic.{name}`: no such dependency in the profile")

    # faults
    faults: list[Fault] = []
    raw_faults = raw.get("faults", []) or []
    if not isinstance(raw_faults, list):
        problems.append("`faults` must be a list")
        raw_faults = []
    for i, f in enumerate(raw_faults):
        where = f"faults[{i}]"
        if not isinstance(f, Mapping):
            problems.append(f"{where} must be a mapping")
            continue
        for key in sorted(set(f) - _FAULT_KEYS):
            problems.append(f"{where}: unknown field `{key}` (known: {', '.join(sorted(_FAULT_KEYS))})")
        dep = f.get("dependency")
        if not isinstance(dep, str):
            problems.append(f"{where}: `dependency` is required")
        elif bank is not None and dep not in bank:
            problems.append(f"{where}: no dependency `{dep}` in the profile")
        tenant = f.get("tenant")
        if tenant is not None:
            tenant = str(tenant)
            if tenants and tenant not in tenants:
                problems.append(f"{where}: tenant `{tenant}` is not among the scenario's tenants")
        try:
            start = parse_duration(f.get("start", 0), f"{where}.start")
            if "end" in f and "duration" in f:
                problems.append(f"{where}: give `duration` or `end`, not both")
            if "end" in f:
                end = parse_duration(f["end"], f"{where}.end")
            elif "duration" in f:
                end = start + parse_duration(f["duration"], f"{where}.duration")
            else:
                problems.append(f"{where}: `duration` (or `end`) is required")
                end = start
            if end <= start:
                problems.append(f"{where}: the window is empty (end <= start)")
        except ValueError as e:
            problems.append(str(e))
            continue
        kind = f.get("kind", "error")
        error_rate, latency = 1.0, 0.0
        if kind == "error":
            er = f.get("error_rate", 1.0)
            if isinstance(er, bool) or not isinstance(er, (int, float)) or not 0 < er <= 1:
                problems.append(f"{where}: `error_rate` must be in (0, 1], got {er!r}")
            else:
                error_rate = float(er)
            if "latency" in f:
                problems.append(f"{where}: `latency` is for kind latency")
        elif kind == "latency":
            try:
                latency = parse_duration(f.get("latency"), f"{where}.latency")
            except ValueError as e:
                problems.append(str(e))
            if "error_rate" in f:
                problems.append(f"{where}: `error_rate` is for kind error")
        else:
            problems.append(f"{where}: `kind` must be error or latency, got {kind!r}")
        if isinstance(dep, str):
            faults.append(Fault(dep, tenant, start, end, str(kind), error_rate, latency))

    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        problems.append(f"`seed` must be an integer, got {seed!r}")
        seed = 0
    name = raw.get("name", Path(source).stem if source else "scenario")
    if problems:
        raise ScenarioError(problems)
    return Scenario(
        name=str(name),
        duration=total,
        tenants=tenants,
        rates=rates,
        faults=faults,
        profile_text=profile_text,
        tick=tick,
        sample=sample,
        seed=seed,
        timeout=timeout,
        source=source,
    )


# --- simulation -----------------------------------------------------------------------


@dataclass
class PartitionReport:
    """What happened to one partition."""

    dependency: str
    partition: str
    faulted: bool
    timeline: list[tuple[float, str]] = field(default_factory=lambda: [(0.0, "closed")])
    calls: int = 0
    real_calls: int = 0
    probes: int = 0
    failures_injected: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return len(self.timeline) > 1

    def as_dict(self) -> dict[str, Any]:
        m = self.metrics
        return {
            "faulted": self.faulted,
            "changed_state": self.changed,
            "final_state": self.timeline[-1][1],
            "time_open_s": m.get("open_seconds_total", 0.0),
            "opened": m.get("opened_total", 0),
            "half_opened": m.get("half_opened_total", 0),
            "closed": m.get("closed_total", 0),
            "calls": self.calls,
            "real_calls": self.real_calls,
            "probes_admitted": self.probes,
            "failures_injected": self.failures_injected,
            "rejected_open": m.get("rejected_open_total", 0),
            "probe_rejects": m.get("probe_rejects_total", 0),
            "fallback": {
                "stale": m.get("fallback_stale_total", 0),
                "degraded": m.get("fallback_degraded_total", 0),
                "error": m.get("fallback_error_total", 0),
                "failed": m.get("fallback_failures_total", 0),
            },
            "timeline": [[round(t, 6), s] for t, s in self.timeline],
        }


@dataclass
class Report:
    """The result of :func:`simulate`."""

    scenario: Scenario
    partitions: dict[str, dict[str, PartitionReport]]
    isolation: dict[str, str]
    wall_seconds: float
    real_admissions: int
    calls: int

    def false_global_trips(self, dependency: str) -> list[str]:
        """Partitions that changed state without being faulted."""
        return [p for p, r in self.partitions[dependency].items() if r.changed and not r.faulted]

    def ok(self) -> bool:
        """No false global trip on any tenant-scoped dependency (CONTRACT.md)."""
        return not any(
            self.false_global_trips(d) for d, iso in self.isolation.items() if iso == "tenant"
        )

    def as_dict(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "scenario": {
                "name": s.name,
                "source": s.source,
                "duration_s": s.duration,
                "tenants": len(s.tenants),
                "rates": s.rates,
                "faults": [f.__dict__ for f in s.faults],
            },
            "wall_seconds": round(self.wall_seconds, 3),
            "calls": self.calls,
            "real_admissions": self.real_admissions,
            "ok": self.ok(),
            "dependencies": {
                d: {
                    "isolation": self.isolation[d],
                    "faulted_partitions": sorted(p for p, r in parts.items() if r.faulted),
                    "false_global_trips": len(self.false_global_trips(d)),
                    "false_global_trip_partitions": self.false_global_trips(d),
                    "partitions": {p: r.as_dict() for p, r in parts.items()},
                }
                for d, parts in self.partitions.items()
            },
        }


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
        self.out.write(f"\rsimulating [{bar}] {pct:3d}% {_fmt_duration(t)}/{_fmt_duration(self.total)}")
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


def simulate(s: Scenario, progress: IO[str] | None = None) -> Report:
    """Runs the scenario on virtual time through the real core."""
    wall0 = time.perf_counter()
    rng = random.Random(s.seed)
    clock = ManualClock()
    bank = Bank.from_yaml(s.profile_text, clock=clock)
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
            r = reports[dep][partition] = PartitionReport(dep, partition, faulted(dep, partition))
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
        if d.probe:
            st.report.probes += 1
            observe(st)  # half-open, even if the probe's outcome reopens it at once
        fault = next((f for f in st.faults if f.start <= t < f.end), None)
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


# --- output ----------------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_report(report: Report) -> str:
    """The report as a plain-text table."""
    s = report.scenario
    out = [
        f"scenario {s.name!r}: {_fmt_duration(s.duration)} virtual, {len(s.tenants)} tenants, "
        f"{report.calls:,} calls ({report.real_admissions:,} real admissions) "
        f"in {report.wall_seconds:.2f}s",
    ]
    for f in s.faults:
        what = f"error {f.error_rate:.0%}" if f.kind == "error" else f"latency {_fmt_duration(f.latency)}"
        out.append(
            f"  fault: {f.dependency} / {f.tenant or 'all partitions'}: {what} "
            f"from {_fmt_duration(f.start)} to {_fmt_duration(f.end)}"
        )
    header = ["dependency", "partition", "faulted", "final", "opened", "half-opened", "closed", "time open",
              "probes", "probe rej", "open rej", "fb stale", "fb degr", "fb error", "fb failed"]
    rows: list[list[str]] = [header]
    for dep, parts in report.partitions.items():
        quiet = 0
        for p, r in sorted(parts.items()):
            if not (r.faulted or r.changed):
                quiet += 1
                continue
            d = r.as_dict()
            fb = d["fallback"]
            rows.append([
                dep, p, "yes" if r.faulted else "no", d["final_state"], str(d["opened"]),
                str(d["half_opened"]), str(d["closed"]),
                _fmt_duration(d["time_open_s"]), str(d["probes_admitted"]), str(d["probe_rejects"]),
                str(d["rejected_open"]), str(fb["stale"]), str(fb["degraded"]), str(fb["error"]),
                str(fb["failed"]),
            ])
        if quiet:
            rows.append([dep, f"({quiet} other{'s' if quiet != 1 else ''})", "no", "closed", "0", "0", "0",
                         "0ms", "0", "0", "0", "0", "0", "0", "0"])
    out.append("")
    out.append(_table(rows))
    out.append("")
    for dep, parts in report.partitions.items():
        for p, r in sorted(parts.items()):
            if not r.changed:
                continue
            steps = [f"{st} at {_fmt_duration(t)}" for t, st in r.timeline[1:]]
            shown = steps if len(steps) <= 12 else steps[:6] + [f"... {len(steps) - 10} more ..."] + steps[-4:]
            out.append(f"timeline {dep} / {p}: closed -> " + " -> ".join(shown))
    out.append("")
    for dep, iso in report.isolation.items():
        trips = report.false_global_trips(dep)
        faulted_n = sum(1 for r in report.partitions[dep].values() if r.faulted)
        verdict = "ok" if not trips else ("FAIL" if iso == "tenant" else "note")
        out.append(
            f"false global trips: {dep} ({iso}): {len(trips)}"
            + (f" [{', '.join(trips[:10])}{', ...' if len(trips) > 10 else ''}]" if trips else "")
            + f"  ({faulted_n} faulted partition{'s' if faulted_n != 1 else ''}) {verdict}"
        )
    return "\n".join(out)


def plot_report(report: Report, path: str | Path) -> None:
    """Each interesting partition's state over time, fault windows shaded."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise RuntimeError(
            "--plot needs matplotlib: pip install 'breakerbank[plot]'"
        ) from e
    s = report.scenario
    panels: list[tuple[str, str, PartitionReport, int]] = []
    for dep, parts in report.partitions.items():
        shown = [(p, r, 0) for p, r in sorted(parts.items()) if r.faulted or r.changed]
        calm = [(p, r) for p, r in sorted(parts.items()) if not (r.faulted or r.changed)]
        if calm:  # one healthy neighbour for contrast, standing for all of them
            shown.append((calm[0][0], calm[0][1], len(calm) - 1))
        panels += [(dep, p, r, like) for p, r, like in shown[:12]]
    if not panels:
        raise RuntimeError("nothing to plot: the scenario has no traffic")
    n = len(panels)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.4 * n + 1.2), sharex=True, squeeze=False)
    level = {"closed": 0, "half_open": 1, "open": 2, "forced_open": 3}
    scale, unit = (60.0, "min") if s.duration >= 180 else (1.0, "s")
    for ax, (dep, p, r, like) in zip(axes[:, 0], panels):
        for f in s.faults:
            if f.dependency == dep and (f.tenant is None or f.tenant == p or report.isolation[dep] == "global"):
                ax.axvspan(f.start / scale, min(f.end, s.duration) / scale, color="tab:red", alpha=0.15, lw=0)
        xs = [t / scale for t, _ in r.timeline] + [s.duration / scale]
        ys = [level[st] for _, st in r.timeline]
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color="tab:blue" if r.faulted else "tab:green")
        ax.set_yticks([0, 1, 2, 3], ["closed", "half-open", "open", "forced"])
        ax.set_ylim(-0.4, 3.4)
        tag = "faulted" if r.faulted else ("FALSE TRIP" if r.changed else "healthy")
        if like:
            tag += f", like {like} other partition{'s' if like != 1 else ''}"
        ax.set_title(f"{dep} / {p} ({tag})", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(f"virtual time ({unit}); shaded: fault windows")
    fig.suptitle(f"breakerbank simulate: {s.name}")
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)


def write_json(report: Report, path: str | Path) -> None:
    """The full report (every live partition) as JSON."""
    Path(path).write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
