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
        "window_calls": 0,
        "window_failures": 0,
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
    seen = email.inspect()
    assert (seen["window_calls"], seen["window_failures"]) == (3, 2)
    clock.advance(11)
    assert email.inspect()["consecutive_failures"] == 0
    assert email.inspect()["window_calls"] == 0


def test_c18_forced_open_has_no_retry_after(bank: bb.Bank) -> None:  # C18
    rates = bank["rates_client"]
    trip(rates, failures=2)
    assert rates.inspect()["retry_after"] == 10.0
    rates.force_open()
    seen = rates.inspect()
    assert seen["state"] == "forced_open" and seen["retry_after"] is None
    assert seen["since"] == bank.now()


# --- C19 Operator transitions -----------------------------------------------------


def test_c19_trip_opens_counts_announces_and_ends_by_itself(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C19
    pay = bank["payments_client"]
    events: list[dict] = []
    bank.on_event(events.append)
    fail(pay, 1, "acme")
    pay.trip(tenant="acme")
    assert pay.state(tenant="acme") == "open"
    assert pay.state(tenant="globex") == "closed"
    d = pay.admit(tenant="acme")
    assert (d.reason, d.retry_after) == ("open", 30.0)
    assert bank.metrics()["payments_client"]["acme"]["opened_total"] == 1
    clock.advance(30)
    for _ in range(2):  # success_threshold: 2
        probe = pay.admit(tenant="acme")
        assert probe.probe
        probe.success()
    assert pay.state(tenant="acme") == "closed"
    assert bank.flush_events()
    ops = [(e["kind"], e["partition"], e["from"], e["to"]) for e in events if e["kind"] == "trip"]
    assert ops == [("trip", "acme", "closed", "open")]


def test_c19_half_open_starts_a_probe_cycle_now(bank: bb.Bank) -> None:  # C19
    rates = bank["rates_client"]
    events: list[dict] = []
    bank.on_event(events.append)
    trip(rates, failures=2)
    rates.half_open()
    assert rates.inspect()["state"] == "half_open"
    probe = rates.admit()
    assert probe.probe
    assert rates.admit().reason == "probe_budget"
    probe.success()
    assert rates.state() == "closed"
    assert bank.metrics()["rates_client"]["global"]["half_opened_total"] == 1
    assert bank.flush_events()
    assert [e["kind"] for e in events if e["kind"] == "half_open"] == ["half_open"]


def test_c19_no_tenant_means_every_partition_and_forced_stays_forced(
    bank: bb.Bank,
) -> None:  # C19
    pay = bank["payments_client"]
    pay.call(lambda: 1, tenant="acme")
    fail(pay, 1, "globex")
    pay.force_open(tenant="globex")
    pay.trip()
    assert pay.state(tenant="acme") == "open"
    assert pay.state(tenant="globex") == "forced_open"  # only reset ends a force
    assert pay.state(tenant="first-seen-later") == "closed"
    pay.half_open()
    assert pay.state(tenant="acme") == "half_open"
    assert pay.state(tenant="globex") == "forced_open"
    with pytest.raises(bb.InvalidTenant):
        pay.trip(tenant="x" * 257)
    with pytest.raises(bb.InvalidTenant):
        pay.half_open(tenant="x" * 257)
