"""C14: the Prometheus exposition parsed back by the reference parser
(prometheus_client's OpenMetrics parser), escapes included."""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics import parser  # installed by mk/py.mk

import breakerbank as bb

from conftest import PROFILE


def test_c14_prometheus_round_trips_through_the_reference_parser() -> None:  # C14
    bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())
    pay = bank["payments_client"]
    nasty = 'ac"me\\x\nline'  # a quote, a backslash and a newline
    for _ in range(3):
        with pytest.raises(RuntimeError):
            pay.call(_boom, tenant=nasty)
    families = {f.name: f for f in parser.text_string_to_metric_families(bank.prometheus())}
    state = {
        s.labels["state"]: s.value
        for s in families["breakerbank_state"].samples
        if s.labels["partition"] == nasty
    }
    assert state == {"closed": 0, "open": 1, "half_open": 0, "forced_open": 0}
    failures = families["breakerbank_failures"]
    assert failures.type == "counter"
    [sample] = [s for s in failures.samples if s.labels.get("partition") == nasty and s.name.endswith("_total")]
    assert sample.value == 3
    assert sample.labels["dependency"] == "payments_client"


def _boom() -> None:
    raise RuntimeError("down")
