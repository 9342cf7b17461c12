"""The scenario format of ``python -m breakerbank simulate``: reading and validating it.

This module owns the harness's own input format (the profile inside it is
the core's: :meth:`~breakerbank.Bank.from_yaml` validates it, and every fact
about a dependency is asked of the bank it builds). Durations are ``250ms``,
``30s``, ``5m``, ``1h`` or seconds::

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
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ._native import Bank, ConfigError, ManualClock

__all__ = [
    "Fault",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
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


def parse_scenario(raw: object, base: Path = Path("."), source: str = "", bank: Bank | None = None) -> Scenario:
    """Validates a scenario given as a mapping (see the module docs).

    With `bank`, the scenario is checked against that bank's dependencies and
    has no `profile` of its own: :func:`~breakerbank.simulation.simulate`
    then runs it on that bank (the pytest plugin's fault injection).
    """
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
    if bank is not None:
        if prof is not None:
            problems.append("`profile`: the scenario runs on a given bank and uses its profile")
    elif prof is None:
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
    if bank is None and profile_text:
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
