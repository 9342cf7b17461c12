"""Fault-injection harness: check a profile, simulate a scenario.

``python -m breakerbank check PROFILE [--against RUNNING]`` validates a
profile through the core and lists every problem; with ``--against``, also
the problems a live reload (C20) of a bank built from ``RUNNING`` would meet. ``python -m breakerbank simulate SCENARIO`` drives the
real core on virtual time (a :class:`~breakerbank.ManualClock`) through a
YAML scenario and reports, per dependency and partition, the time open,
probe rejects, fallback use by kind and *false global trips* (partitions
other than the faulted ones that changed state; docs/reference/behaviour.md, "Verification").

This module is the harness's front door and keeps its names; the work lives
in four modules, each owning one thing:

- :mod:`breakerbank.scenario`: the scenario format (documented there),
  reading and validating it;
- :mod:`breakerbank.simulation`: running a scenario through the core;
- :mod:`breakerbank.report`: the report, and its text, plot and JSON forms;
- :mod:`breakerbank.tune`: ``python -m breakerbank tune``, sizing one
  dependency's breaker by running outages drawn from its SLO through
  :mod:`breakerbank.simulation` (C21).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ._native import check_profile as _check_profile
from ._native import profile_advice as _profile_advice
from .report import PartitionReport, Report, format_report, plot_report, write_json
from .scenario import Fault, Scenario, ScenarioError, load_scenario, parse_duration, parse_scenario
from .simulation import simulate

if TYPE_CHECKING:
    from ._native import _Advice

__all__ = [
    "Fault",
    "PartitionReport",
    "Report",
    "Scenario",
    "ScenarioError",
    "check_profile",
    "format_report",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
    "plot_report",
    "profile_advice",
    "simulate",
    "write_json",
]


def check_profile(path: str | Path, against: str | Path | None = None) -> list[str]:
    """Every problem of the profile at ``path`` (empty when it is valid).

    With ``against`` (the profile a running bank was built from), also every
    problem ``bank.reload`` would meet putting ``path`` in force (C20): a
    dry run, no bank is built.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        running = None if against is None else Path(against).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return [str(e)]
    return _check_profile(text, running)


def profile_advice(path: str | Path) -> list[_Advice]:
    """C21's advice for the valid profile at ``path``: each dependency's
    durations held against its ``slo``, and open durations that look
    copied; each piece names the field, the value to set where one
    follows, and why. Empty for an invalid profile (see
    :func:`check_profile`) or one sized from its SLO.
    """
    return _profile_advice(Path(path).read_text(encoding="utf-8"))
