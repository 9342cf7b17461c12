"""Fault-injection harness: check a profile, simulate a scenario.

``python -m breakerbank check PROFILE`` loads a profile through the core and
lists every problem. ``python -m breakerbank simulate SCENARIO`` drives the
real core on virtual time (a :class:`~breakerbank.ManualClock`) through a
YAML scenario and reports, per dependency and partition, the time open,
probe rejects, fallback use by kind and *false global trips* (partitions
other than the faulted ones that changed state; CONTRACT.md "Verification").

This module is the harness's front door and keeps its names; the work lives
in three modules, each owning one thing:

- :mod:`breakerbank.scenario`: the scenario format (documented there),
  reading and validating it;
- :mod:`breakerbank.simulation`: running a scenario through the core;
- :mod:`breakerbank.report`: the report, and its text, plot and JSON forms.
"""

from __future__ import annotations

from pathlib import Path

from ._native import Bank, ConfigError, ManualClock
from .report import PartitionReport, Report, format_report, plot_report, write_json
from .scenario import Fault, Scenario, ScenarioError, load_scenario, parse_duration, parse_scenario
from .simulation import simulate

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
    "simulate",
    "write_json",
]


def check_profile(path: str | Path) -> list[str]:
    """Every problem of the profile at ``path`` (empty when it is valid)."""
    try:
        Bank.load(path, clock=ManualClock())
    except ConfigError as e:
        return list(e.problems or [str(e)])
    except OSError as e:
        return [str(e)]
    return []
