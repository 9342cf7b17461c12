"""Inspection (C18) and operator transitions (C19) through the binding."""

from __future__ import annotations

import pytest

import breakerbank as bb

from conftest import fail, trip

# --- C18 Inspection ---------------------------------------------------------------


def test_c18_inspect_reads_counters_phase_and_episode(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C18
    pay = bank["payments_client"]
    clock.advance(5)
    assert pay.inspect(tenant="acme") == {
        "state": "closed",
        "consecutive_failures": 0,
        "half_open_successes": 0,
        "probes_in_flight": 0,
        "retrips": 0,
        "since": 0.0,
        "retry_after": None,
    }
    fail(pay, 2, "acme")
    assert pay.inspect(tenant="acme")["consecutive_failures"] == 2
    fail(pay, 1, "acme")
    tripped = bank.now()
    clock.advance(10)
    seen = pay.inspect(tenant="acme")
    assert (seen["state"], seen["since"], seen["retry_after"]) == ("open", tripped, 20.0)
    clock.advance(20)
    d = pay.admit(tenant="acme")
    assert d.probe
    d.success()
    probe = pay.admit(tenant="acme")
    seen = pay.inspect(tenant="acme")
    assert seen["state"] == "half_open" and seen["retry_after"] is None
    assert (seen["half_open_successes"], seen["probes_in_flight"]) == (1, 1)
    probe.failure()
    seen = pay.inspect(tenant="acme")
    assert (seen["state"], seen["retrips"], seen["since"]) == ("open", 1, tripped)


def test_c18_inspect_never_creates_a_partition(bank: bb.Bank) -> None:  # C18
    pay = bank["payments_client"]
    assert pay.inspect(tenant="ghost")["state"] == "closed"
    assert "ghost" not in bank.metrics().get("payments_client", {})
    with pytest.raises(bb.TenantRequired):
        pay.inspect()
    with pytest.raises(bb.InvalidTenant):
        pay.inspect(tenant="x" * 257)


def test_c18_failure_rate_counts_the_windows_failures(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C18
    email = bank["email_client"]
    fail(email, 1)
    email.call(lambda: 1)
    fail(email, 1)
    assert email.inspect()["consecutive_failures"] == 2
    clock.advance(11)
    assert email.inspect()["consecutive_failures"] == 0


def test_c18_forced_open_has_no_retry_after(bank: bb.Bank) -> None:  # C18
    rates = bank["rates_client"]
    trip(rates, failures=2)
    assert rates.inspect()["retry_after"] == 10.0
    rates.force_open()
    seen = rates.inspect()
    assert seen["state"] == "forced_open" and seen["retry_after"] is None
    assert seen["since"] == bank.now()
