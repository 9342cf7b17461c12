"""The result of a simulation and its outputs: the text table, the plot, JSON.

:class:`Report` holds, per dependency and partition, what the simulation
observed (state timeline, calls, probes) and the core's metrics for that
partition at the end; it judges *false global trips* (partitions other than
the faulted ones that changed state; docs/reference/behaviour.md, "Verification"). Every
number shown comes from the simulation or the core: nothing here is
recomputed from the profile.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .scenario import Scenario

__all__ = [
    "PartitionReport",
    "Report",
    "format_duration",
    "format_report",
    "plot_report",
    "write_json",
]


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
    #: Probes admitted while a fault covered the call: sent into the outage.
    probes_in_fault: int = 0
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
            "probes_in_fault": self.probes_in_fault,
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
        """No false global trip on any tenant-scoped dependency (docs/reference/behaviour.md)."""
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


def format_duration(seconds: float) -> str:
    """``250ms``, ``42.0s``, ``3m30.5s``, ``1h05m``: a duration for people to read."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        m, s = divmod(seconds, 60)
        return f"{int(m)}m{s:04.1f}s"
    h, rest = divmod(seconds, 3600)
    return f"{int(h)}h{int(rest // 60):02d}m"


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
        f"scenario {s.name!r}: {format_duration(s.duration)} virtual, {len(s.tenants)} tenants, "
        f"{report.calls:,} calls ({report.real_admissions:,} real admissions) "
        f"in {report.wall_seconds:.2f}s",
    ]
    for f in s.faults:
        what = f"error {f.error_rate:.0%}" if f.kind == "error" else f"latency {format_duration(f.latency)}"
        out.append(
            f"  fault: {f.dependency} / {f.tenant or 'all partitions'}: {what} "
            f"from {format_duration(f.start)} to {format_duration(f.end)}"
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
                format_duration(d["time_open_s"]), str(d["probes_admitted"]), str(d["probe_rejects"]),
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
            steps = [f"{st} at {format_duration(t)}" for t, st in r.timeline[1:]]
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
