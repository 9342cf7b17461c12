"""``python -m breakerbank``: check a profile, simulate a fault-injection scenario.

    python -m breakerbank check PROFILE [--against RUNNING]
    python -m breakerbank simulate SCENARIO [--json FILE] [--plot FILE.png] [--progress]
    python -m breakerbank tune PROFILE [--dependency NAME] [--outages N] [--seed N] [--rate R]
                                       [--json FILE] [--plot FILE.png] [--progress]

``check`` exits 0 for a valid profile, printing C21's advice (what to
change and why, from each dependency's ``slo``), or 1 listing every
problem; with
``--against``, the problems of reloading PROFILE into a bank built from
RUNNING (C20) count too: a dry run of ``bank.reload``, no bank is built.
``simulate`` prints the report; it exits 1 when a tenant-scoped dependency
had a false global trip (a partition that was not faulted changed state),
and 2 for an invalid scenario. ``tune`` sizes one dependency's
``open_duration`` and backoff from its ``slo.recovery`` (C21,
:mod:`breakerbank.tune`): it prints the candidates' table, the
recommendation and why, and exits 0, or 2 when it cannot run (an invalid
profile, no ``slo.recovery``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import harness, tune


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m breakerbank",
        description="breakerbank's harness: validate profiles, run fault-injection scenarios "
        "on virtual time through the real core.",
        epilog="Scenario format: see `pydoc breakerbank.scenario`.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate a profile; exit 1 listing every problem")
    c.add_argument("profile", help="profile YAML file")
    c.add_argument("--against", metavar="RUNNING",
                   help="also check reloading PROFILE into a bank built from RUNNING (C20)")
    s = sub.add_parser("simulate", help="run a fault-injection scenario on virtual time")
    s.add_argument("scenario", help="scenario YAML file")
    s.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    s.add_argument("--plot", metavar="FILE.png", help="draw states over time (needs breakerbank[plot])")
    prog = s.add_mutually_exclusive_group()
    prog.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show a progress bar on stderr (default: only on a terminal)")
    prog.add_argument("--no-progress", dest="progress", action="store_false")
    t = sub.add_parser("tune", help="sweep open_duration and backoff over outages drawn from the SLO (C21)")
    t.add_argument("profile", help="profile YAML file, or a scenario (its profile and traffic)")
    t.add_argument("--dependency", metavar="NAME",
                   help="the dependency to size (default: the only one, or the only one with slo.recovery)")
    t.add_argument("--outages", metavar="N", type=int, default=20, help="outages to draw (default 20)")
    t.add_argument("--seed", type=int, default=1, help="seed of the outage draw (default 1)")
    t.add_argument("--rate", type=float, metavar="CALLS_PER_S",
                   help="calls per second to the partition (default: the scenario's, or 10)")
    t.add_argument("--json", metavar="FILE", help="also write the candidates and the recommendation as JSON")
    t.add_argument("--plot", metavar="FILE.png",
                   help="plot flaps against extra outage (needs breakerbank[plot])")
    tprog = t.add_mutually_exclusive_group()
    tprog.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show a progress bar on stderr (default: only on a terminal)")
    tprog.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def _check(path: str, against: str | None) -> int:
    problems = harness.check_profile(path, against)
    if problems:
        print(f"{path}: {len(problems)} problem{'s' if len(problems) != 1 else ''}")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    advice = harness.profile_advice(path)
    if not advice:
        print(f"{path}: ok")
        return 0
    n = len(advice)
    print(f"{path}: ok, {n} piece{'s' if n != 1 else ''} of advice (C21)")
    for a in advice:
        print(f"  - {a['message']}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    try:
        scenario = harness.load_scenario(args.scenario)
    except harness.ScenarioError as e:
        print(f"{args.scenario}: {len(e.problems)} problem{'s' if len(e.problems) != 1 else ''}",
              file=sys.stderr)
        for problem in e.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    show = sys.stderr.isatty() if args.progress is None else args.progress
    report = harness.simulate(scenario, progress=sys.stderr if show else None)
    print(harness.format_report(report))
    if args.json:
        harness.write_json(report, args.json)
        print(f"wrote {args.json}")
    if args.plot:
        try:
            harness.plot_report(report, args.plot)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}")
    return 0 if report.ok() else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m breakerbank`` and the ``breakerbank`` script."""
    args = _parser().parse_args(argv)
    if args.command == "check":
        return _check(args.profile, args.against)
    if args.command == "tune":
        return tune.main_tune(args)
    return _simulate(args)


if __name__ == "__main__":
    sys.exit(main())
