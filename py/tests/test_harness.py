"""The harness: `python -m breakerbank check|simulate` (docs/reference/behaviour.md, Verification)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PROFILE

from breakerbank import harness
from breakerbank.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "single_tenant_fault.yaml"
LONG = ROOT / "examples" / "long_run.yaml"

PAYMENTS = PROFILE.split("  email_client:")[0]


def scenario(tmp_path: Path, body: str, profile_text: str = PAYMENTS, name: str = "s.yaml") -> Path:
    """Writes a scenario; the line `profile: @` becomes `profile_text`, inline."""
    text = textwrap.dedent(body).replace("profile: @\n", "profile:\n" + textwrap.indent(profile_text, "  "))
    path = tmp_path / name
    path.write_text(text)
    return path


# --- check ------------------------------------------------------------------------------


def test_check_valid_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(PROFILE)
    assert main(["check", str(p)]) == 0
    assert "ok" in capsys.readouterr().out


def test_check_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # C2, C6
    p = tmp_path / "p.yaml"
    p.write_text(
        PROFILE.replace("payments_client:", '"GET /payments":').replace("    open_duration: 15s\n", "")
    )
    assert main(["check", str(p)]) == 1
    out = capsys.readouterr().out
    assert "GET /payments" in out
    assert "email_client" in out and "open_duration" in out
    assert out.count("\n  - ") >= 2


def test_check_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml" in capsys.readouterr().out


# --- scenario parsing ---------------------------------------------------------------------


def test_parse_duration() -> None:
    assert harness.parse_duration("250ms") == 0.25
    assert harness.parse_duration("30s") == 30
    assert harness.parse_duration("5m") == 300
    assert harness.parse_duration("1h") == 3600
    assert harness.parse_duration(2) == 2.0
    for bad in ("soon", "-1s", True, None, "1d"):
        with pytest.raises(ValueError):
            harness.parse_duration(bad)


def test_invalid_scenario_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = scenario(
        tmp_path,
        """\
        duration: forever
        tenants: 3
        rate: 10
        colour: blue
        profile: @
        faults:
          - {dependency: nope_client, start: 1m, duration: 1m}
          - {dependency: payments_client, tenant: tenant-09, start: 1m, duration: 1m, kind: smoke}
        """,
    )
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    for needle in ("duration", "colour", "nope_client", "tenant-09", "smoke"):
        assert needle in err


def test_duplicate_keys_in_a_scenario_are_rejected(tmp_path: Path) -> None:
    path = scenario(tmp_path, "duration: 1m\nduration: 2m\n")
    with pytest.raises(harness.ScenarioError, match="duplicate"):
        harness.load_scenario(path)


def test_profile_problems_surface_in_the_scenario(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        """\
        duration: 1m
        tenants: 2
        rate: 10
        profile: @
        """,
        PAYMENTS.replace("open_duration: 30s", "open_duration: 0s"),
    )
    with pytest.raises(harness.ScenarioError) as err:
        harness.load_scenario(path)
    assert any("open_duration" in p for p in err.value.problems)


# --- simulate -------------------------------------------------------------------------------


def test_example_single_tenant_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # C9
    out_json = tmp_path / "r.json"
    assert main(["simulate", str(EXAMPLE), "--json", str(out_json)]) == 0
    text = capsys.readouterr()
    assert "false global trips: payments_client (tenant): 0" in text.out
    assert text.err == ""  # no progress bar when not asked and not a tty
    report = json.loads(out_json.read_text())
    dep = report["dependencies"]["payments_client"]
    assert dep["false_global_trips"] == 0
    assert dep["faulted_partitions"] == ["tenant-07"]
    faulty = dep["partitions"]["tenant-07"]
    assert faulty["opened"] >= 1 and faulty["half_opened"] >= 1 and faulty["closed"] == 1
    assert faulty["final_state"] == "closed"
    assert faulty["probes_admitted"] >= 3  # recovery went through probes (success_threshold 3)
    states = [s for _, s in faulty["timeline"]]
    assert states[:2] == ["closed", "open"] and "half_open" in states and states[-1] == "closed"
    assert faulty["fallback"]["error"] == faulty["rejected_open"] + faulty["probe_rejects"] > 0
    # two minutes of fault, then the open period (with backoff) and the probes
    assert 120 <= faulty["time_open_s"] <= 300
    others = [p for p in dep["partitions"] if p != "tenant-07"]
    assert len(others) == 19
    assert all(not dep["partitions"][p]["changed_state"] for p in others)
    assert report["calls"] == pytest.approx(200 * 600, rel=0.01)


def test_fault_on_every_tenant_counts_every_partition_as_faulted(tmp_path: Path) -> None:  # C9
    path = scenario(
        tmp_path,
        """\
        duration: 3m
        tenants: 5
        rate: 50
        profile: @
        faults:
          - {dependency: payments_client, start: 30s, duration: 30s}
        """,
    )
    report = harness.simulate(harness.load_scenario(path))
    parts = report.partitions["payments_client"]
    assert all(r.faulted and r.changed for r in parts.values())
    assert report.false_global_trips("payments_client") == []
    assert report.ok()


def test_latency_fault_trips_through_slow_call(tmp_path: Path) -> None:  # C5
    path = scenario(
        tmp_path,
        """\
        duration: 4m
        tenants: [acme, globex]
        rate: 20
        profile: @
        faults:
          - {dependency: payments_client, tenant: acme, start: 1m, duration: 1m, kind: latency, latency: 3s}
        """,
        PAYMENTS.replace("consecutive_failures: 3}", "consecutive_failures: 3, slow_call: 2s}"),
    )
    report = harness.simulate(harness.load_scenario(path))
    acme = report.partitions["payments_client"]["acme"].as_dict()
    assert acme["opened"] >= 1 and acme["final_state"] == "closed"
    assert not report.partitions["payments_client"]["globex"].changed


def test_false_global_trip_detection() -> None:
    s = harness.Scenario("x", 60.0, ["a", "b"], {"d": 1.0}, [], "")
    a = harness.PartitionReport("d", "a", faulted=True, timeline=[(0.0, "closed"), (1.0, "open")])
    b = harness.PartitionReport("d", "b", faulted=False, timeline=[(0.0, "closed"), (2.0, "open")])
    r = harness.Report(s, {"d": {"a": a, "b": b}}, {"d": "tenant"}, 0.0, 0, 0)
    assert r.false_global_trips("d") == ["b"]
    assert not r.ok()
    assert "FAIL" in harness.format_report(r)


def test_long_scenario_batches_healthy_calls() -> None:
    report = harness.simulate(harness.load_scenario(LONG))
    assert report.calls == pytest.approx(3_600_000, rel=0.001)
    # Far fewer real admissions than calls: healthy traffic is tallied in bulk.
    assert report.real_admissions < report.calls / 5
    assert report.ok()
    for tenant in ("tenant-007", "tenant-042", "tenant-099"):
        r = report.partitions["payments_client"][tenant]
        assert r.faulted and r.changed and r.timeline[-1][1] == "closed"
    assert report.partitions["rates_client"]["global"].metrics["fallback_stale_total"] > 0


def test_progress_bar_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLE), "--progress"]) == 0
    assert "simulating [" in capsys.readouterr().err


def test_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "demo.png"
    assert main(["simulate", str(EXAMPLE), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_python_dash_m(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(PROFILE)
    run = subprocess.run(
        [sys.executable, "-m", "breakerbank", "check", str(p)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "ok" in run.stdout
