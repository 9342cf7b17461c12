"""C21: ``python -m breakerbank tune`` sizes a breaker from its SLO, and its
recommendation does better than a badly sized profile when replayed
through ``simulate`` on outages of typical length."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from breakerbank import harness, tune
from breakerbank.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

TYPICAL = 30.0  # slo.recovery.typical, seconds


def profile(open_duration: str, backoff: str | None = None) -> str:
    extra = f"    backoff: {backoff}\n" if backoff else ""
    return (
        "dependencies:\n"
        "  payments_client:\n"
        "    isolation: tenant\n"
        "    trip: {consecutive_failures: 5}\n"
        f"    open_duration: {open_duration}\n"
        f"{extra}"
        "    half_open: {probe_budget: 1, success_threshold: 2}\n"
        "    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}\n"
        "    recovery_bound: 10m\n"
        "    slo: {latency: 1s, recovery: {typical: 30s, worst: 2m}}\n"
    )


def sized(text: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The profile ``text`` as data, with the dependency's sizing replaced by ``fields``."""
    p = yaml.safe_load(text)
    dep = p["dependencies"]["payments_client"]
    dep.pop("backoff", None)
    dep.update(fields)
    return p


def replay(profile_data: dict[str, Any], outages: int = 3) -> tuple[int, float]:
    """``outages`` outages of typical length through ``simulate``, one tenant
    at 10 calls/s: (flaps, time open after the dependency had recovered),
    read from the partition's timeline."""
    gap = 600.0
    faults = [
        {"dependency": "payments_client", "tenant": "tenant-01", "start": 10 + i * gap,
         "duration": TYPICAL, "kind": "error"}
        for i in range(outages)
    ]
    s = harness.parse_scenario({
        "duration": outages * gap, "tenants": ["tenant-01"], "rate": 10, "tick": "100ms",
        "profile": profile_data, "faults": faults,
    })
    report = harness.simulate(s)
    tl = report.partitions["payments_client"]["tenant-01"].timeline
    flaps = sum(1 for (_, a), (_, b) in zip(tl, tl[1:]) if a == "half_open" and b == "open")
    extra = 0.0
    for f in s.faults:
        closed = next(t for t, st in tl if t >= f.end and st == "closed")
        extra += closed - f.end
    return flaps, extra


def test_c21_tune_recommends_on_every_example() -> None:
    assert EXAMPLES
    for path in EXAMPLES:
        raw = yaml.safe_load(path.read_text())
        deps = (raw.get("profile") or raw)["dependencies"]
        for name in deps:
            report = tune.tune_file(path, dependency=name, outages=3)
            assert report.recommendation.outages == 3, (path, name)
            assert report.reason, (path, name)
            assert tune.format_tune(report).count("recommended") == 1, (path, name)


def test_c21_open_duration_three_times_shorter_than_typical_flaps_more_than_the_recommendation() -> None:
    text = profile("10s")
    report = tune.tune(text, outages=10)
    assert report.recommended != report.profile_index, tune.format_tune(report)
    mine_flaps, _ = replay(sized(text, {"open_duration": "10s"}))
    rec_flaps, _ = replay(sized(text, report.recommendation.candidate.profile_fields()))
    assert mine_flaps >= 3  # a 30s outage probed every 10s re-trips
    assert rec_flaps < mine_flaps, tune.format_tune(report)


def test_c21_open_duration_three_times_longer_than_typical_stays_open_longer_than_the_recommendation() -> None:
    text = profile("90s")
    report = tune.tune(text, outages=10)
    assert report.recommended != report.profile_index, tune.format_tune(report)
    _, mine_extra = replay(sized(text, {"open_duration": "90s"}))
    _, rec_extra = replay(sized(text, report.recommendation.candidate.profile_fields()))
    assert mine_extra > 3 * 50  # about 60s a 30s outage, three of them
    assert rec_extra < mine_extra, tune.format_tune(report)


def test_c21_outages_are_lognormal_through_typical_and_worst_and_seeded() -> None:
    a, sigma = tune.draw_outages(60.0, 600.0, 2000, seed=3)
    b, _ = tune.draw_outages(60.0, 600.0, 2000, seed=3)
    assert a == b
    s = sorted(a)
    assert 50 < s[1000] < 72  # the median is typical
    assert 480 < s[1900] < 760  # the 95th percentile is worst
    assert sigma == pytest.approx(1.3998, rel=1e-3)


def test_c21_candidates_surround_the_profile_and_typical() -> None:
    cs = tune.candidates(10.0, None, 30.0, 120.0)
    assert len(cs) == 10
    opens = sorted({c.open_duration for c in cs})
    assert 10.0 in opens and 30.0 in opens
    assert opens[0] == pytest.approx(5.0) and opens[-1] == pytest.approx(60.0)
    assert {c.backoff for c in cs} == {None, (2.0, 120.0)}
    assert tune.Candidate(10.0, None) in cs


def test_c21_tune_command_prints_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(profile("10s"))
    out_json, out_png = tmp_path / "t.json", tmp_path / "t.png"
    assert main(["tune", str(p), "--outages", "4", "--json", str(out_json), "--plot", str(out_png)]) == 0
    out = capsys.readouterr().out
    assert "recommendation: open_duration:" in out and "why:" in out
    assert "profile" in out and "recommended" in out
    data = json.loads(out_json.read_text())
    assert data["dependency"] == "payments_client"
    assert data["outages"]["distribution"] == "lognormal" and len(data["outages"]["lengths_s"]) == 4
    assert len(data["candidates"]) == 10
    assert {"flaps", "probes_in_outage", "open_after_recovery_s", "fallback_served"} <= set(data["candidates"][0])
    assert set(data["recommendation"]) >= {"open_duration"}
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The same seed, the same numbers.
    again = tune.tune(profile("10s"), outages=4)
    assert [r.as_dict() for r in again.results] == data["candidates"]


def test_c21_tune_without_an_slo_refuses_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(profile("10s").replace("    slo: {latency: 1s, recovery: {typical: 30s, worst: 2m}}\n", ""))
    assert main(["tune", str(p)]) == 2
    err = capsys.readouterr().err
    assert "payments_client" in err and "slo.recovery" in err


def test_c21_tune_on_an_invalid_profile_lists_its_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(profile("10s").replace("worst: 2m", "worst: 10s"))
    assert main(["tune", str(p)]) == 2
    assert "`slo.recovery.worst`" in capsys.readouterr().err


def test_c21_simulate_counts_probes_sent_into_the_fault() -> None:
    text = profile("10s")
    s = harness.parse_scenario({
        "duration": "3m", "tenants": ["tenant-01"], "rate": 10, "profile": yaml.safe_load(text),
        "faults": [{"dependency": "payments_client", "start": "10s", "duration": "30s"}],
    })
    r = harness.simulate(s).partitions["payments_client"]["tenant-01"]
    assert r.probes_in_fault >= 2  # at about 10s and 20s into the outage
    assert r.probes > r.probes_in_fault  # and the ones that closed it, after


def test_c21_the_sizing_guide_shows_tunes_real_output_for_its_example() -> None:
    guide = (ROOT / "docs" / "guide" / "sizing.md").read_text()
    blocks = guide.split("```")
    first_yaml = next(b for b in blocks if b.startswith("yaml\n"))[len("yaml\n"):]
    example = ROOT / "examples" / "sizing.yaml"
    assert yaml.safe_load(first_yaml) == yaml.safe_load(example.read_text())
    report = tune.tune_file(example)
    shown = next(b for b in blocks if b.startswith("text\ntune payments_client"))
    lines = tune.format_tune(report).splitlines()
    # Everything but the first line's wall time, as the guide shows it.
    assert lines[0].split(" through the core in ")[0] in shown
    for line in lines[1:]:
        assert line in shown, line


def test_c21_tune_takes_a_scenarios_traffic_for_one_partition_or_the_rate_given(tmp_path: Path) -> None:
    long_run = ROOT / "examples" / "long_run.yaml"
    # 900 calls/s over 100 tenants: one tenant's partition gets 9.
    assert tune.tune_file(long_run, dependency="payments_client", outages=1).rate == 9.0
    assert tune.tune_file(long_run, dependency="rates_client", outages=1, rate=20.0).rate == 20.0
    p = tmp_path / "p.yaml"
    p.write_text(profile("10s"))
    out = tmp_path / "t.json"
    assert main(["tune", str(p), "--outages", "1", "--rate", "4", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rate_per_s"] == 4.0
