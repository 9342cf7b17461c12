"""C20: bank.reload(text) and the `check --against` dry run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import dep_yaml, profile

import breakerbank as bb
from breakerbank.__main__ import main


def pay(**fields: str) -> str:
    return dep_yaml("payments_client", **fields)


def email(**fields: str) -> str:
    return dep_yaml("email_client", isolation="global", fallback="{kind: degraded}", **fields)


def fail(dep: bb.Dependency, tenant: str | None, n: int) -> None:
    for _ in range(n):
        d = dep.admit(tenant=tenant)
        assert d.admitted
        d.failure()


def test_c20_thresholds_lowered_and_raised_keep_state(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay(trip="{consecutive_failures: 5}")), clock=clock)
    dep = bank["payments_client"]
    fail(dep, "acme", 2)
    held = dep.admit(tenant="acme")
    bank.reload(profile(pay(trip="{consecutive_failures: 3}")))
    assert dep.state("acme") == "closed"
    held.failure()  # admitted before the reload, counted after it
    assert dep.state("acme") == "open"
    bank.reload(profile(pay(trip="{consecutive_failures: 9}")))
    dep.reset("acme")
    fail(dep, "acme", 8)
    assert dep.state("acme") == "closed"


def test_c20_reload_mid_traffic(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay()), clock=clock)
    dep = bank["payments_client"]
    stop = threading.Event()
    refused: list[str] = []

    def traffic(tenant: str) -> None:
        while not stop.is_set():
            d = dep.admit(tenant=tenant)
            if d.admitted:
                d.success()
            else:
                refused.append(tenant)

    threads = [threading.Thread(target=traffic, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        for n in range(2, 40):
            bank.reload(profile(pay(trip=f"{{consecutive_failures: {n}}}")))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert refused == []


def test_c20_a_bad_profile_leaves_the_running_one(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay(), email()), clock=clock)
    dep = bank["payments_client"]
    fail(dep, "acme", 2)
    before = bank.metrics()
    with pytest.raises(bb.ConfigError) as e:
        bank.reload(profile(pay(trip="{consecutive_failures: 1}"), email(trip="{failure_rate: 1.5, min_calls: 4, window: 10s}")))
    assert e.value.problems is not None
    assert any("email_client" in p and "failure_rate" in p for p in e.value.problems)
    with pytest.raises(bb.ConfigError):
        bank.reload("dependencies: {}\nbogus: 1\n")
    assert bank.metrics() == before
    assert bank.dependencies == ["payments_client", "email_client"]
    fail(dep, "acme", 0)
    assert dep.state("acme") == "closed"
    fail(dep, "acme", 1)  # the third failure, under the threshold of 3 kept
    assert dep.state("acme") == "open"


def test_c20_removed_dependency_raises_unknown_dependency(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay(), email()), clock=clock)
    gone = bank["email_client"]
    held = gone.admit()
    bank.reload(profile(pay()))
    assert "email_client" not in bank
    assert bank.dependencies == ["payments_client"]
    with pytest.raises(bb.UnknownDependency, match="reload"):
        gone.admit()
    with pytest.raises(bb.UnknownDependency):
        gone.state()
    with pytest.raises(bb.UnknownDependency):
        gone.reset()
    with pytest.raises(bb.UnknownDependency):
        gone.call(lambda: 1)
    with pytest.raises(bb.UnknownDependency):
        bank["email_client"]
    held.success()  # a permit issued before is recorded harmlessly


def test_c20_isolation_changed_starts_afresh(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(email(trip="{consecutive_failures: 1}")), clock=clock)
    old = bank["email_client"]
    fail(old, None, 1)
    assert old.state() == "open"
    bank.reload(profile(dep_yaml("email_client", fallback="{kind: degraded}")))
    with pytest.raises(bb.UnknownDependency):
        old.admit()
    new = bank["email_client"]
    assert new.state("acme") == "closed"
    with pytest.raises(bb.TenantRequired):
        new.admit()


def test_c20_open_breaker_keeps_its_open_until(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay(trip="{consecutive_failures: 1}")), clock=clock)
    dep = bank["payments_client"]
    fail(dep, "acme", 1)
    bank.reload(profile(pay(trip="{consecutive_failures: 1}", open_duration="1s")))
    clock.advance(2)
    d = dep.admit(tenant="acme")
    assert d.reason == "open" and d.retry_after == pytest.approx(28)


def test_c20_reload_is_an_event(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay(), email()), clock=clock)
    events: list[dict[str, object]] = []
    bank.on_event(events.append)
    bank.reload(profile(pay()))
    assert bank.flush_events()
    assert sorted((e["kind"], e["dependency"], e["partition"]) for e in events) == [
        ("reload", "email_client", "*"),
        ("reload", "payments_client", "*"),
    ]


def test_c20_a_trip_kind_change_applies_and_starts_the_dependency_afresh(clock: bb.ManualClock) -> None:
    bank = bb.Bank.from_yaml(profile(pay(), email(trip="{consecutive_failures: 2}")), clock=clock)
    old = bank["email_client"]
    payments = bank["payments_client"]
    fail(old, None, 1)
    fail(payments, "acme", 2)
    bank.reload(profile(pay(), email(trip="{failure_rate: 0.5, min_calls: 4, window: 10s}")))
    with pytest.raises(bb.UnknownDependency):
        old.admit()
    new = bank["email_client"]
    assert new.state() == "closed"
    fail(new, None, 3)  # the old policy would have tripped at the second
    assert new.state() == "closed"
    fail(new, None, 1)  # four calls, all failed: over the rate
    assert new.state() == "open"
    fail(payments, "acme", 1)  # the other dependency kept its count of two
    assert payments.state("acme") == "open"


def test_c20_check_against_is_a_dry_run_of_reload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    running = tmp_path / "running.yaml"
    running.write_text(profile(pay(max_tenants="100"), email()))
    ok = tmp_path / "ok.yaml"
    ok.write_text(profile(pay(max_tenants="50", trip="{consecutive_failures: 9}")))
    assert main(["check", str(ok), "--against", str(running)]) == 0
    assert "ok" in capsys.readouterr().out
    # A new trip kind and a larger table: reload starts the dependency
    # afresh, so the dry run has nothing to refuse.
    afresh = tmp_path / "afresh.yaml"
    afresh.write_text(profile(pay(max_tenants="200"), email(trip="{failure_rate: 0.5, min_calls: 4, window: 10s}")))
    assert main(["check", str(afresh), "--against", str(running)]) == 0
    assert "ok" in capsys.readouterr().out
    assert bb._native.check_profile(afresh.read_text(), running.read_text()) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text(profile(pay(max_tenants="0"), email(trip="{failure_rate: 1.5, min_calls: 4, window: 10s}")))
    assert main(["check", str(bad), "--against", str(running)]) == 1
    out = capsys.readouterr().out
    assert "2 problems" in out
    assert "max_tenants" in out and "email_client" in out
    assert main(["check", str(ok), "--against", str(bad)]) == 1
    assert "the running profile" in capsys.readouterr().out
    assert bb._native.check_profile("dependencies: {}\nbogus: 1\n") != []
