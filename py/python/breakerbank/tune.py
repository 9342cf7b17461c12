"""``python -m breakerbank tune``: size one dependency's breaker from its SLO (C21).

:func:`tune` draws outages from the dependency's declared
``slo.recovery`` and replays each one, for each candidate ``open_duration``
and backoff, through the real core on virtual time
(:func:`~breakerbank.simulation.simulate` on a
:class:`~breakerbank.ManualClock`, with the harness's traffic). Per
candidate it reports:

- *flaps*: re-trips from half-open (a probe failed and the breaker opened
  again);
- *probes into the outage*: probes admitted while the dependency was down;
- *open after recovery*: how long after the dependency had recovered the
  breaker still refused callers (until it closed);
- *fallback served*: calls answered by the declared fallback.

**Outages.** Their lengths are log-normal, with ``slo.recovery.typical``
as the median and ``slo.recovery.worst`` as the 95th percentile. Outage
lengths are positive and skewed (most are short, a few are very long),
which a log-normal describes with just these two numbers; the median is
what "typical" means, and the 95th percentile makes "worst" the outage of
a bad month rather than the longest ever seen, so one outage in twenty is
longer still. The draw is seeded, so a run repeats exactly.

**Recommendation.** Among the candidates that re-trip at most once per
outage on average (:data:`MAX_FLAPS`), the one that keeps the breaker open
for the least time after recovery; if none is that calm, the one that
flaps least. A flap sends probes into a dependency that is still down and
bounces every caller's partition once more, so one per outage is the price
paid for not waiting too long; beyond it, more waiting is better.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from ._native import Bank, ManualClock
from .report import PartitionReport, format_duration
from .scenario import Fault, Scenario, ScenarioError, load_scenario
from .simulation import simulate

__all__ = [
    "MAX_FLAPS",
    "P95_Z",
    "Candidate",
    "Result",
    "TuneError",
    "TuneReport",
    "candidates",
    "draw_outages",
    "format_tune",
    "measure",
    "plot_tune",
    "tune",
    "tune_file",
    "write_tune_json",
]

#: The standard normal's 95th percentile: ``worst`` is the outages' p95.
P95_Z = 1.6448536269514722

#: The most re-trips from half-open per outage, on average, that the
#: recommendation accepts.
MAX_FLAPS = 1.0

#: The harness's traffic for a profile given without a scenario: calls per
#: second to the dependency's one partition.
DEFAULT_RATE = 10.0


class TuneError(ValueError):
    """``tune`` cannot run: the dependency, its SLO or the input is unusable."""


@dataclass(frozen=True)
class Candidate:
    """One sizing to try: a base open period and an optional backoff."""

    open_duration: float
    #: ``(multiplier, max)`` in seconds, or None for no backoff.
    backoff: tuple[float, float] | None

    def label(self) -> str:
        """``30s``, ``30s, x2 to 5m``: the candidate as the table shows it."""
        base = format_duration(self.open_duration)
        if self.backoff is None:
            return f"{base}, no backoff"
        m, cap = self.backoff
        return f"{base}, x{m:g} to {format_duration(cap)}"

    def profile_fields(self) -> dict[str, Any]:
        """The candidate as the profile's fields (durations in whole milliseconds)."""
        out: dict[str, Any] = {"open_duration": _ms(self.open_duration)}
        if self.backoff is not None:
            m, cap = self.backoff
            out["backoff"] = {"multiplier": m, "max": _ms(max(cap, self.open_duration))}
        return out


def _ms(seconds: float) -> str:
    """A duration as a profile writes it: ``1m``, ``35s``, ``1500ms``."""
    ms = max(1, round(seconds * 1000))
    if ms % 3_600_000 == 0:
        return f"{ms // 3_600_000}h"
    if ms % 60_000 == 0:
        return f"{ms // 60_000}m"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


@dataclass
class Result:
    """What one candidate did over every outage."""

    candidate: Candidate
    outages: int = 0
    flaps: int = 0
    probes_in_outage: int = 0
    open_after_recovery: float = 0.0
    fallback: int = 0
    #: Outages after which the breaker had not closed by the end of its run.
    unclosed: int = 0

    def per_outage(self, total: float) -> float:
        return total / self.outages if self.outages else 0.0

    @property
    def mean_flaps(self) -> float:
        return self.per_outage(self.flaps)

    @property
    def mean_open_after_recovery(self) -> float:
        return self.per_outage(self.open_after_recovery)

    def as_dict(self) -> dict[str, Any]:
        c = self.candidate
        return {
            "label": c.label(),
            "open_duration_s": c.open_duration,
            "backoff": None if c.backoff is None else {"multiplier": c.backoff[0], "max_s": c.backoff[1]},
            "outages": self.outages,
            "flaps": self.flaps,
            "flaps_per_outage": round(self.mean_flaps, 3),
            "probes_in_outage": self.probes_in_outage,
            "open_after_recovery_s": round(self.open_after_recovery, 3),
            "open_after_recovery_per_outage_s": round(self.mean_open_after_recovery, 3),
            "fallback_served": self.fallback,
            "unclosed": self.unclosed,
        }


@dataclass
class TuneReport:
    """The result of :func:`tune`."""

    dependency: str
    typical: float
    worst: float
    sigma: float
    seed: int
    rate: float
    outages: list[float]
    results: list[Result]
    #: Index in ``results`` of the profile's own sizing.
    profile_index: int
    #: Index in ``results`` of the recommendation.
    recommended: int
    reason: str
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def recommendation(self) -> Result:
        return self.results[self.recommended]

    @property
    def profile_result(self) -> Result:
        return self.results[self.profile_index]

    def as_dict(self) -> dict[str, Any]:
        return {
            "dependency": self.dependency,
            "outages": {
                "distribution": "lognormal",
                "median_s": self.typical,
                "p95_s": self.worst,
                "sigma": round(self.sigma, 6),
                "seed": self.seed,
                "lengths_s": [round(x, 3) for x in self.outages],
            },
            "rate_per_s": self.rate,
            "candidates": [r.as_dict() for r in self.results],
            "profile": self.profile_index,
            "recommended": self.recommended,
            # `backoff: None` when the recommendation has none, as the profile's may.
            "recommendation": {"backoff": None, **self.recommendation.candidate.profile_fields()},
            "reason": self.reason,
            "notes": self.notes,
            "wall_seconds": round(self.wall_seconds, 3),
        }


# --- outages and candidates ---------------------------------------------------------


def draw_outages(typical: float, worst: float, n: int, seed: int) -> tuple[list[float], float]:
    """``n`` outage lengths, log-normal with median ``typical`` and p95 ``worst``, and the sigma."""
    if n < 1:
        raise TuneError(f"--outages must be at least 1, got {n}")
    sigma = math.log(worst / typical) / P95_Z
    rng = random.Random(seed)
    mu = math.log(typical)
    return [rng.lognormvariate(mu, sigma) for _ in range(n)], sigma


def _round2(x: float) -> float:
    """``x`` to two significant figures, at least a millisecond."""
    if x <= 0.001:
        return 0.001
    digits = 1 - int(math.floor(math.log10(x)))
    return max(0.001, round(x, digits))


def candidates(open_duration: float, backoff: tuple[float, float] | None, typical: float,
               worst: float, opens: int = 5) -> list[Candidate]:
    """The sweep: ``opens`` open durations from half the smaller of the
    profile's and ``typical`` to twice the larger, spaced evenly on a log
    scale and including both; each without and with a backoff (the
    profile's, and doubling up to ``worst``, or none when that is the
    profile's). The profile's own sizing is among them.
    """
    lo = min(open_duration, typical) / 2
    hi = max(open_duration, typical) * 2
    grid = [lo * (hi / lo) ** (i / (opens - 1)) for i in range(opens)] if opens > 1 else [open_duration]
    for anchor in (open_duration, typical):
        i = min(range(len(grid)), key=lambda j: abs(math.log(grid[j] / anchor)))
        if grid[i] not in (open_duration, typical):
            grid[i] = anchor
    values = sorted({v if v in (open_duration, typical) else _round2(v) for v in grid})
    alternative: tuple[float, float] | None = (2.0, worst)
    if backoff == alternative:
        alternative = None
    out = []
    for b in (backoff, alternative):
        for v in values:
            out.append(Candidate(v, None if b is None else (b[0], max(b[1], v))))
    return out


# --- one outage through the core ---------------------------------------------------------


def _dependency_profile(profile: dict[str, Any], name: str, c: Candidate) -> str:
    """The profile with only dependency ``name``, sized as ``c``."""
    dep = dict(profile["dependencies"][name])
    dep.pop("backoff", None)
    dep.update(c.profile_fields())
    # One tenant is driven: a small table keeps each run's bank cheap to
    # build, and changes nothing a breaker does.
    if dep.get("isolation") == "tenant":
        dep["max_tenants"] = 16
    top = {k: v for k, v in profile.items() if k not in ("dependencies", "memory_limit")}
    top["dependencies"] = {name: dep}
    return yaml.safe_dump(top, sort_keys=False)


def _closed_at(r: PartitionReport, after: float) -> float | None:
    """When the partition was closed again at or after ``after``."""
    state = "closed"
    for t, st in r.timeline:
        if t <= after:
            state = st
        elif st == "closed":
            return t
    return after if state == "closed" else None


def measure(profile_text: str, dependency: str, outage: float, rate: float,
            tenant: str | None) -> tuple[int, int, float, int, bool]:
    """One outage of length ``outage`` through the core, on the profile given:
    (flaps, probes into the outage, open after recovery, fallback served,
    closed by the end).
    """
    bank = Bank.from_yaml(profile_text, clock=ManualClock())
    dep = bank[dependency]
    window = dep.window or 0.0
    backoff = dep.backoff
    cap = backoff["max"] if backoff else dep.open_duration
    tick = 0.5
    start = window + 2 * tick + 1.0
    end = start + outage
    # Long enough for the longest open period to run out and the probes to close it.
    duration = end + cap + window + 10.0 + 20.0 / rate
    s = Scenario(
        name=f"tune {dependency}",
        duration=duration,
        tenants=[tenant] if tenant is not None else [],
        rates={dependency: rate},
        faults=[Fault(dependency, None, start, end, "error", 1.0, 0.0)],
        profile_text=profile_text,
        tick=tick,
        sample=1.0,
    )
    report = simulate(s, bank=bank)
    r = report.partitions[dependency][dep.breaker_of(tenant)]
    tl = r.timeline
    flaps = sum(1 for (_, a), (_, b) in zip(tl, tl[1:]) if a == "half_open" and b == "open")
    closed = _closed_at(r, end)
    extra = (closed if closed is not None else duration) - end
    fb = r.as_dict()["fallback"]
    return flaps, r.probes_in_fault, max(0.0, extra), sum(fb.values()), closed is not None


# --- the sweep --------------------------------------------------------------------------


class _Bar:
    def __init__(self, total: int, what: str, out: IO[str] | None) -> None:
        self.total, self.what, self.out, self.done_n = total, what, out, 0

    def step(self) -> None:
        self.done_n += 1
        if self.out is None:
            return
        pct = 100 * self.done_n // self.total
        if pct == 100 * (self.done_n - 1) // self.total and self.done_n != self.total:
            return
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        self.out.write(f"\rtuning {self.what} [{bar}] {pct:3d}% {self.done_n}/{self.total} runs")
        self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.write("\n")
            self.out.flush()


def _recommend(results: Sequence[Result], profile_index: int) -> tuple[int, str]:
    calm = [i for i, r in enumerate(results) if r.mean_flaps <= MAX_FLAPS]
    mine = results[profile_index]
    if calm:
        best = min(calm, key=lambda i: (results[i].mean_open_after_recovery, results[i].mean_flaps))
        r = results[best]
        why = (
            f"of the candidates that re-trip at most {MAX_FLAPS:g} time per outage on average, "
            f"it keeps the breaker open the least after the dependency has recovered "
            f"({format_duration(r.mean_open_after_recovery)} per outage, {r.mean_flaps:.2f} flaps)"
        )
    else:
        best = min(range(len(results)),
                   key=lambda i: (results[i].mean_flaps, results[i].mean_open_after_recovery))
        r = results[best]
        why = (
            f"no candidate re-trips at most {MAX_FLAPS:g} time per outage on average; "
            f"it flaps least ({r.mean_flaps:.2f} per outage, "
            f"{format_duration(r.mean_open_after_recovery)} open after recovery)"
        )
    if best == profile_index:
        return best, f"keep the profile's {r.candidate.label()}: {why}"
    return best, (
        f"{r.candidate.label()}: {why}; the profile's {mine.candidate.label()} flaps "
        f"{mine.mean_flaps:.2f} times and stays open {format_duration(mine.mean_open_after_recovery)} "
        f"after recovery per outage"
    )


def tune(profile_text: str, dependency: str | None = None, outages: int = 20, seed: int = 1,
         rate: float | None = None, progress: IO[str] | None = None) -> TuneReport:
    """Sweeps ``open_duration`` and backoff for one dependency over outages
    drawn from its ``slo.recovery`` (see the module docs).

    ``dependency`` defaults to the profile's only one, or its only one with
    an ``slo.recovery``. ``rate`` is the calls per second to the faulted
    partition (default :data:`DEFAULT_RATE`).
    """
    wall0 = time.perf_counter()
    bank = Bank.from_yaml(profile_text)  # every problem, as ConfigError
    name = _pick(bank, dependency)
    dep = bank[name]
    slo = dep.slo
    recovery = slo["recovery"] if slo else None
    if recovery is None:
        raise TuneError(
            f"dependency `{name}` declares no `slo.recovery`: tune draws outages from it; add "
            f"`slo: {{recovery: {{typical: …, worst: …}}}}` from the dependency's incident history "
            f"(how long its outages typically and at worst last)"
        )
    typical, worst = recovery["typical"], recovery["worst"]
    lengths, sigma = draw_outages(typical, worst, outages, seed)
    b = dep.backoff
    mine = Candidate(dep.open_duration, None if b is None else (b["multiplier"], b["max"]))
    cands = candidates(mine.open_duration, mine.backoff, typical, worst)
    profile_index = cands.index(mine)
    raw = yaml.safe_load(profile_text)
    tenant = "tenant-01" if dep.isolation == "tenant" else None
    rate = DEFAULT_RATE if rate is None else rate
    if not rate > 0:
        raise TuneError(f"the call rate must be positive, got {rate}")
    results = [Result(c) for c in cands]
    bar = _Bar(len(cands) * len(lengths), name, progress)
    for res in results:
        text = _dependency_profile(raw, name, res.candidate)
        for length in lengths:
            flaps, probes, extra, fallback, closed = measure(text, name, length, rate, tenant)
            res.outages += 1
            res.flaps += flaps
            res.probes_in_outage += probes
            res.open_after_recovery += extra
            res.fallback += fallback
            res.unclosed += not closed
            bar.step()
    bar.close()
    best, reason = _recommend(results, profile_index)
    notes = []
    if any(r.unclosed for r in results):
        notes.append("some runs ended with the breaker still open: their time open after recovery "
                     "is counted to the end of the run")
    if slo and slo.get("latency") is None:
        notes.append(f"`{name}` declares no `slo.latency`: tune sizes the open period only")
    return TuneReport(name, typical, worst, sigma, seed, rate, lengths, results, profile_index, best,
                      reason, time.perf_counter() - wall0, notes)


def _pick(bank: Bank, dependency: str | None) -> str:
    names = list(bank.dependencies)
    if dependency is not None:
        if dependency not in bank:
            raise TuneError(f"no dependency `{dependency}` in the profile (it has {', '.join(names)})")
        return dependency
    if len(names) == 1:
        return names[0]
    with_slo = [n for n in names if (slo := bank[n].slo) is not None and slo["recovery"] is not None]
    if len(with_slo) == 1:
        return with_slo[0]
    raise TuneError(
        f"the profile has {len(names)} dependencies ({', '.join(names)}): choose one with --dependency"
    )


def tune_file(path: str | Path, dependency: str | None = None, outages: int = 20, seed: int = 1,
              rate: float | None = None, progress: IO[str] | None = None) -> TuneReport:
    """:func:`tune` on a profile file, or on a scenario file's profile with
    its traffic (the calls per second of one partition of the dependency).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TuneError(f"cannot read `{path}`: {e}") from e
    raw = yaml.safe_load(text)
    if isinstance(raw, dict) and "profile" in raw:
        try:
            s = load_scenario(path)
        except ScenarioError as e:
            raise TuneError("; ".join(e.problems)) from e
        if rate is None:
            bank = Bank.from_yaml(s.profile_text)
            name = _pick(bank, dependency)
            per = s.rates.get(name, 0.0)
            if bank[name].isolation == "tenant" and s.tenants:
                per /= len(s.tenants)
            rate = per if per > 0 else None
            dependency = name
        text = s.profile_text
    return tune(text, dependency, outages, seed, rate, progress)


# --- outputs --------------------------------------------------------------------------------


def format_tune(report: TuneReport) -> str:
    """The candidates' table, the recommendation and why."""
    n = len(report.outages)
    lengths = sorted(report.outages)
    out = [
        f"tune {report.dependency}: {n} outage{'s' if n != 1 else ''} drawn log-normal with median "
        f"{format_duration(report.typical)} (slo.recovery.typical) and p95 {format_duration(report.worst)} "
        f"(slo.recovery.worst), seed {report.seed}: {format_duration(lengths[0])} to "
        f"{format_duration(lengths[-1])}; {report.rate:g} calls/s; {len(report.results)} candidates "
        f"through the core in {report.wall_seconds:.2f}s",
        "",
    ]
    rows = [["candidate", "flaps", "probes in outage", "open after recovery", "fallback served", ""]]
    for i, r in enumerate(report.results):
        marks = []
        if i == report.profile_index:
            marks.append("profile")
        if i == report.recommended:
            marks.append("recommended")
        rows.append([
            r.candidate.label(),
            f"{r.mean_flaps:.2f}",
            f"{r.per_outage(r.probes_in_outage):.2f}",
            format_duration(r.mean_open_after_recovery),
            f"{r.per_outage(r.fallback):.0f}",
            ", ".join(marks),
        ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        out.append("  ".join(c.ljust(w) if i in (0, 5) else c.rjust(w)
                             for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    out.append("(per outage, averaged over the outages)")
    out.append("")
    fields = report.recommendation.candidate.profile_fields()
    shown = ", ".join(f"{k}: {_flow(v)}" for k, v in fields.items())
    if "backoff" not in fields:
        shown += ", no backoff"
    out.append(f"recommendation: {shown}")
    out.append(f"why: {report.reason}")
    out.extend(f"note: {n}" for n in report.notes)
    return "\n".join(out)


def _flow(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    return str(v)


def write_tune_json(report: TuneReport, path: str | Path) -> None:
    """The report as JSON: the outages, every candidate's numbers, the recommendation."""
    Path(path).write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")


def plot_tune(report: TuneReport, path: str | Path) -> None:
    """Flaps against time open after recovery, one point per candidate; the
    profile's choice and the recommendation marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise RuntimeError("--plot needs matplotlib: pip install 'breakerbank[plot]'") from e
    fig, ax = plt.subplots(figsize=(8, 5.2))
    styles: dict[bool, tuple[str, str]] = {False: ("o", "no backoff"), True: ("^", "with backoff")}
    for has_backoff, (marker, label) in styles.items():
        pts = [r for r in report.results if (r.candidate.backoff is not None) == has_backoff]
        if pts:
            ax.scatter([r.mean_open_after_recovery for r in pts], [r.mean_flaps for r in pts],
                       marker=marker, color="tab:blue", alpha=0.7, label=label)
    for r in report.results:
        c = r.candidate
        short = format_duration(c.open_duration) + (
            "" if c.backoff is None else f" x{c.backoff[0]:g}\u2192{format_duration(c.backoff[1])}")
        ax.annotate(short, (r.mean_open_after_recovery, r.mean_flaps), fontsize=7,
                    xytext=(5, 4), textcoords="offset points")
    mine, rec = report.profile_result, report.recommendation
    ax.scatter([mine.mean_open_after_recovery], [mine.mean_flaps], s=220, facecolors="none",
               edgecolors="tab:red", linewidths=2, label=f"profile: {mine.candidate.label()}")
    ax.scatter([rec.mean_open_after_recovery], [rec.mean_flaps], s=260, marker="*", color="tab:green",
               label=f"recommended: {rec.candidate.label()}", zorder=3)
    ax.axhline(MAX_FLAPS, color="grey", ls="--", lw=0.8,
               label=f"at most {MAX_FLAPS:g} flap per outage")
    # Symmetric log: the calm candidates near 0 and 1 flap stay apart
    # from the ones that flap dozens of times.
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(0, 2.5 * max(max(r.mean_flaps for r in report.results), MAX_FLAPS))
    ax.set_xlabel("extra outage: time open after the dependency recovered (s, mean per outage)")
    ax.set_ylabel("flaps: re-trips from half-open (mean per outage)")
    ax.set_title(f"breakerbank tune: {report.dependency}, {len(report.outages)} outages "
                 f"(median {format_duration(report.typical)}, p95 {format_duration(report.worst)})",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)


def main_tune(args: Any) -> int:
    """The ``tune`` command: 0 with a recommendation, 2 when tune cannot run."""
    from ._native import ConfigError

    err = sys.stderr
    show = err.isatty() if args.progress is None else args.progress
    try:
        report = tune_file(args.profile, args.dependency, args.outages, args.seed, args.rate,
                           err if show else None)
    except ConfigError as e:
        problems = e.problems or [str(e)]
        print(f"{args.profile}: {len(problems)} problem{'s' if len(problems) != 1 else ''}", file=err)
        for p in problems:
            print(f"  - {p}", file=err)
        return 2
    except TuneError as e:
        print(f"{args.profile}: {e}", file=err)
        return 2
    print(format_tune(report))
    if args.json:
        write_tune_json(report, args.json)
        print(f"wrote {args.json}")
    if args.plot:
        try:
            plot_tune(report, args.plot)
        except RuntimeError as e:
            print(f"error: {e}", file=err)
            return 2
        print(f"wrote {args.plot}")
    return 0

