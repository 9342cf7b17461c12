"""C22: observe mode. Every call admitted, each firing of the trip policy a
`would_trip` (metric and event), a reload switching the mode."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import dep_yaml, profile

import breakerbank as bb


def svc(mode: str | None, **fields: str) -> str:
    """`svc_client`, global, trips after 5 failures; `mode` None leaves it out."""
    base = {"isolation": "global", "trip": "{consecutive_failures: 5}"}
    base.update(fields)
    if mode is not None:
        base["mode"] = mode
    return profile(dep_yaml("svc_client", **base))


def fail(dep: bb.Dependency, tenant: str | None, n: int) -> None:
    for _ in range(n):
        d = dep.admit(tenant=tenant)
        assert d.admitted
        d.failure()


def listen(bank: bb.Bank) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    bank.on_event(events.append)
    return events


def would_trips(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "would_trip"]


def test_c22_fifteen_failures_at_five_admit_every_call_and_count_three_would_trips(
    clock: bb.ManualClock,
) -> None:
    bank = bb.Bank.from_yaml(svc("observe"), clock=clock)
    events = listen(bank)
    dep = bank["svc_client"]
    for _ in range(15):
        d = dep.admit()
        assert d.admitted and not d.probe
        d.failure()
        assert dep.state() == "closed"
    m = bank.metrics()["svc_client"]
    assert m["global"]["would_trip_total"] == 3
    assert m["*"]["would_trip_total"] == 3
    assert m["global"]["failures_total"] == 15
    assert m["global"]["opened_total"] == 0
    assert 'breakerbank_dependency_would_trip_total{dependency="svc_client"} 3' in bank.prometheus()
    assert bank.flush_events()
    seen = would_trips(events)
    assert len(seen) == 3
    assert all(e["partition"] == "global" and e["from"] is None and e["to"] is None for e in seen)
    assert not [e for e in events if e["kind"] == "transition"]
    assert dep.inspect()["consecutive_failures"] == 0


def test_c22_a_failure_rate_policy_in_observe_mode(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(
        svc("observe", trip="{failure_rate: 0.5, min_calls: 4, window: 10s}"), clock=clock
    )
    dep = bank["svc_client"]
    for _ in range(12):
        fail(dep, None, 1)
        clock.advance(0.01)
    assert dep.state() == "closed"
    assert bank.metrics()["svc_client"]["global"]["would_trip_total"] == 3


def test_c22_a_would_trip_in_one_tenant_does_not_touch_another(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(svc("observe", isolation="tenant"), clock=clock)
    events = listen(bank)
    dep = bank["svc_client"]
    fail(dep, "globex", 3)
    fail(dep, "acme", 15)
    m = bank.metrics()["svc_client"]
    assert m["acme"]["would_trip_total"] == 3
    assert m["globex"]["would_trip_total"] == 0
    assert m["*"]["would_trip_total"] == 3
    assert dep.inspect("globex")["consecutive_failures"] == 3
    assert bank.flush_events()
    assert [e["partition"] for e in would_trips(events)] == ["acme"] * 3


def test_c22_a_reload_switches_the_mode_both_ways(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(svc("observe"), clock=clock)
    dep = bank["svc_client"]
    fail(dep, None, 9)
    bank.reload(svc("enforce"))
    assert dep.inspect()["consecutive_failures"] == 0  # a switch to enforce starts closed
    fail(dep, None, 4)
    assert dep.state() == "closed"
    fail(dep, None, 1)
    assert dep.state() == "open"
    bank.reload(svc(None))  # no mode: enforce, no switch
    assert dep.state() == "open"
    bank.reload(svc("observe"))
    assert dep.state() == "closed"
    fail(dep, None, 5)
    assert dep.state() == "closed"
    assert bank.metrics()["svc_client"]["global"]["would_trip_total"] == 2


@pytest.mark.parametrize("bad", ["watch", "METRICS_ONLY", "1"])
def test_c22_a_bad_mode_is_a_config_error(bad: str) -> None:
    with pytest.raises(bb.ConfigError, match=r"svc_client.*`mode`.*`observe`"):
        bb.Bank.from_yaml(svc(bad))
