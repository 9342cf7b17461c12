"""C21, sizing from the SLO: the profile's ``slo`` as Python sees it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import dep_yaml, profile

import breakerbank as bb
from breakerbank import harness
from breakerbank.__main__ import main


def test_c21_slo_and_the_durations_it_is_held_against_are_readable() -> None:
    bank = bb.Bank.from_yaml(profile(
        dep_yaml("payments_client", open_duration="20s", backoff="{multiplier: 2.0, max: 5m}",
                 slo="{latency: 800ms, recovery: {typical: 1m, worst: 10m}}"),
        dep_yaml("email_client", isolation="global", slo="{latency: 300ms}"),
        dep_yaml("rates_client", isolation="global"),
    ))
    pay = bank["payments_client"]
    assert pay.open_duration == 20.0
    assert pay.backoff == {"multiplier": 2.0, "max": 300.0}
    assert pay.slo == {"latency": 0.8, "recovery": {"typical": 60.0, "worst": 600.0}}
    assert bank["email_client"].slo == {"latency": 0.3, "recovery": None}
    assert bank["rates_client"].slo is None
    assert bank["rates_client"].backoff is None


def test_c21_worst_below_typical_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(bb.ConfigError) as e:
        bb.Bank.from_yaml(profile(dep_yaml("payments_client", slo="{recovery: {typical: 5m, worst: 1m}}")))
    assert any("payments_client" in p and "`slo.recovery.worst`" in p for p in e.value.problems), e.value.problems


# --- check's advice -----------------------------------------------------------------


SIZED = profile(dep_yaml(
    "payments_client",
    trip="{consecutive_failures: 5, slow_call: 1500ms}",
    open_duration="50s",
    backoff="{multiplier: 2.0, max: 10m}",
    recovery_bound="15m",
    slo="{latency: 800ms, recovery: {typical: 1m, worst: 10m}}",
))


def test_c21_a_sized_profile_checks_ok_without_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(SIZED)
    assert main(["check", str(p)]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "advice" not in out
    assert harness.profile_advice(p) == []


def test_c21_check_advises_from_the_slo_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(SIZED.replace("open_duration: 50s", "open_duration: 20s").replace("recovery_bound: 15m", "recovery_bound: 5m"))
    assert main(["check", str(p)]) == 0
    out = capsys.readouterr().out
    assert "2 pieces of advice" in out, out
    assert "`open_duration`" in out and "flaps" in out and "`recovery_bound`" in out, out
    advice = harness.profile_advice(p)
    assert [(a["dependency"], a["field"], a["kind"], a["suggested"]) for a in advice] == [
        ("payments_client", "open_duration", "open_duration_far_from_recovery", 60.0),
        ("payments_client", "recovery_bound", "recovery_bound_below_worst", 600.0),
    ]
    assert all(a["message"] in out for a in advice)


def test_c21_check_prints_problems_and_exits_1_on_an_invalid_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(SIZED.replace("worst: 10m", "worst: 10s"))
    assert main(["check", str(p)]) == 1
    out = capsys.readouterr().out
    assert "1 problem" in out and "`slo.recovery.worst`" in out, out


def test_c21_check_warns_about_a_copied_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(profile(
        dep_yaml("payments_client", open_duration="60s"),
        dep_yaml("email_client", isolation="global", open_duration="60s"),
    ))
    assert main(["check", str(p)]) == 0
    out = capsys.readouterr().out
    assert "resilience4j" in out, out
    assert "every dependency (`payments_client`, `email_client`)" in out, out
