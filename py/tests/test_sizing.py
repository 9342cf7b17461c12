"""C21, sizing from the SLO: the profile's ``slo`` as Python sees it."""

from __future__ import annotations

import pytest
from conftest import dep_yaml, profile

import breakerbank as bb


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
