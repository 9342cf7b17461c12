"""breakerbank's pytest plugin: banks on virtual time, fault injection by
dependency and tenant, and the "no false global trips" assertion.

Installed with the package (entry point ``pytest11``), so its fixtures are
there in any test suite of a project that depends on breakerbank:

``breakerbank_clock``
    A :class:`~breakerbank.ManualClock` at 0 s.
``breakerbank_bank``
    A factory: ``breakerbank_bank(profile, clock=None)`` builds a
    :class:`~breakerbank.Bank` on ``breakerbank_clock`` (or `clock`) from a
    profile given as YAML text, or as a path (a :class:`pathlib.Path`, or a
    one-line string ending in ``.yaml`` or ``.yml``).
``breakerbank_faults``
    :func:`inject_faults`: runs traffic and faults on a bank through the
    harness's engine (:func:`breakerbank.simulation.simulate`) and returns
    its :class:`~breakerbank.report.Report`.

and a plain function, :func:`assert_no_false_global_trips`.

    from breakerbank.pytest_plugin import assert_no_false_global_trips

    def test_one_tenant_outage_stays_with_that_tenant(breakerbank_bank, breakerbank_faults):
        bank = breakerbank_bank("profiles/prod.yaml")
        report = breakerbank_faults(
            bank, duration="10m", tenants=20, rate=200,
            faults=[{"dependency": "payments_client", "tenant": "tenant-07",
                     "start": "2m", "duration": "2m"}],
        )
        assert report.partitions["payments_client"]["tenant-07"].changed
        assert_no_false_global_trips(report)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ._native import Bank, ManualClock
from .report import Report, format_duration
from .scenario import parse_scenario
from .simulation import simulate

__all__ = [
    "assert_no_false_global_trips",
    "breakerbank_bank",
    "breakerbank_clock",
    "breakerbank_faults",
    "inject_faults",
    "load_bank",
]


def load_bank(profile: str | os.PathLike[str], clock: ManualClock) -> Bank:
    """A bank on `clock` from a profile's YAML text or file (module docs)."""
    if isinstance(profile, os.PathLike) or (
        isinstance(profile, str) and "\n" not in profile and profile.strip().endswith((".yaml", ".yml"))
    ):
        return Bank.load(Path(profile), clock=clock)
    return Bank.from_yaml(profile, clock=clock)


def inject_faults(
    bank: Bank,
    faults: Sequence[Mapping[str, Any]],
    *,
    duration: str | float,
    tenants: int | Sequence[str] | None = None,
    rate: float | None = None,
    traffic: Mapping[str, Mapping[str, float]] | None = None,
    tick: str | float | None = None,
    sample: str | float | None = None,
    seed: int | None = None,
    timeout: str | float | None = None,
) -> Report:
    """Drives `bank` through `duration` of virtual time with `faults`.

    The arguments are the fields of a scenario (``pydoc
    breakerbank.scenario``) less its profile, which is the bank's; each
    fault is a mapping with the scenario's fault fields (``dependency``,
    ``tenant``, ``start``, ``duration`` or ``end``, ``kind``,
    ``error_rate``, ``latency``). The bank must be on a
    :class:`~breakerbank.ManualClock`, which ends `duration` later; times
    count from its time at the call. An invalid scenario raises
    :class:`breakerbank.harness.ScenarioError` listing every problem.
    """
    raw: dict[str, Any] = {"duration": duration, "faults": [dict(f) for f in faults]}
    if tenants is not None:
        raw["tenants"] = tenants if isinstance(tenants, int) else list(tenants)
    given = {"rate": rate, "traffic": traffic, "tick": tick, "sample": sample, "seed": seed, "timeout": timeout}
    raw.update({k: v for k, v in given.items() if v is not None})
    scenario = parse_scenario(raw, source="breakerbank_faults", bank=bank)
    return simulate(scenario, bank=bank)


def _timeline(steps: Iterable[tuple[float, str]]) -> str:
    return " -> ".join(f"{state} at {format_duration(t)}" for t, state in steps)


def assert_no_false_global_trips(
    subject: Report | Bank,
    dependency: str | None = None,
    faulty: Mapping[str, Iterable[str]] | None = None,
) -> None:
    """Fails when a partition other than the faulty ones changed state.

    For a :class:`~breakerbank.report.Report` (from ``breakerbank_faults``),
    the faulty partitions are the faults' and a change is one seen during
    the run: the report's own judgement. For a :class:`~breakerbank.Bank`,
    `faulty` maps each dependency to its faulty tenants, and a change is any
    since the bank was made, read from the core's metrics: a partition not
    closed, or one with a transition counted (opened, half-opened, closed).

    Every tenant-scoped dependency is checked, or only `dependency` (which
    may be global) when given.
    """
    found: list[str] = []
    if isinstance(subject, Report):
        if faulty is not None:
            raise TypeError("faulty= is for a Bank: a report knows its faults")
        names = [dependency] if dependency is not None else [
            d for d, iso in subject.isolation.items() if iso == "tenant"
        ]
        for name in names:
            for p in subject.false_global_trips(name):
                steps = subject.partitions[name][p].timeline
                found.append(f"{name} / {p}: {steps[0][1]} -> {_timeline(steps[1:])}")
    elif isinstance(subject, Bank):
        faulty = faulty or {}
        unknown = sorted(set(faulty) - set(subject.dependencies))
        if unknown:
            raise KeyError(f"faulty= names no dependency of the bank: {', '.join(unknown)}")
        names = [dependency] if dependency is not None else [
            d for d in subject.dependencies if subject[d].isolation == "tenant"
        ]
        snapshot = subject.metrics()
        for name in names:
            dep = subject[name]
            excused = {dep.breaker_of(t) for t in faulty.get(name, ())}
            for p, m in snapshot[name].items():
                if p == "*":  # the dependency as a whole
                    continue
                moved = {k: m[k] for k in ("opened_total", "half_opened_total", "closed_total") if m[k]}
                if p not in excused and (m["state"] != "closed" or moved):
                    counts = ", ".join(f"{k} {v}" for k, v in moved.items())
                    found.append(f"{name} / {p}: {m['state']}" + (f" ({counts})" if counts else ""))
    else:
        raise TypeError(f"expected a breakerbank Report or Bank, got {type(subject).__name__}")
    if found:
        raise AssertionError(
            f"{len(found)} false global trip{'s' if len(found) != 1 else ''} "
            "(partitions not faulted that changed state):\n  " + "\n  ".join(found)
        )


@pytest.fixture
def breakerbank_clock() -> ManualClock:
    """A ManualClock at 0 s, shared by the banks of ``breakerbank_bank``."""
    return ManualClock()


@pytest.fixture
def breakerbank_bank(breakerbank_clock: ManualClock) -> Callable[..., Bank]:
    """``breakerbank_bank(profile, clock=None)``: a bank on virtual time from
    a profile's YAML text or file."""

    def make(profile: str | os.PathLike[str], clock: ManualClock | None = None) -> Bank:
        return load_bank(profile, clock if clock is not None else breakerbank_clock)

    return make


@pytest.fixture
def breakerbank_faults() -> Callable[..., Report]:
    """:func:`inject_faults`: traffic and faults on a bank's virtual time."""
    return inject_faults
