"""Every clause (docs/reference/behaviour.md), reached through the Python API only.

Each test names its clause (`c7_...`) and says `# C7`. Time is a ManualClock:
nothing here sleeps on the clock; the garbage-collection tests poll the
process's thread list, with a bound.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable

import pytest
from conftest import PROFILE, Boom, boom, dep_yaml, fail, metric, partitions, profile, trip

import breakerbank as bb

# --- C1 Identity -----------------------------------------------------------


def test_c1_dependencies_never_share_a_breaker(bank: bb.Bank) -> None:  # C1
    rates = bank["rates_client"]
    trip(rates, failures=2)
    # Another global dependency is untouched, and so is every tenant partition.
    assert bank["email_client"].state() == "closed"
    assert bank["payments_client"].state(tenant="acme") == "closed"
    assert bank["email_client"].call(lambda: "sent") == "sent"


def test_c1_partition_is_global_or_the_tenant(bank: bb.Bank) -> None:  # C1
    bank["payments_client"].call(lambda: 1, tenant="acme")
    bank["rates_client"].call(lambda: 1)
    assert list(partitions(bank, "payments_client")) == ["acme"]
    assert list(partitions(bank, "rates_client")) == ["global"]


def test_c1_global_dependency_ignores_the_tenant(bank: bb.Bank) -> None:  # C1
    rates = bank["rates_client"]
    fail(rates, 1, tenant="a")
    fail(rates, 1, tenant="b")  # the same breaker: second failure trips it
    assert rates.state() == "open"
    assert rates.state(tenant="zzz") == "open"


def test_c1_breaker_of_names_the_partition_without_creating_it(bank: bb.Bank) -> None:  # C1
    pay, rates = bank["payments_client"], bank["rates_client"]
    assert pay.breaker_of("acme") == "acme"
    assert rates.breaker_of("acme") == rates.breaker_of() == "global"
    assert pay.breaker_of() == "<overflow>"  # no tenant: no partition of its own
    assert partitions(bank, "payments_client") == {}  # asking created nothing


# --- C2 Names --------------------------------------------------------------


@pytest.mark.parametrize("name", ["GET /payments", "payments/charge", "payments client", "POST x"])
def test_c2_route_like_names_are_rejected(name: str) -> None:  # C2
    with pytest.raises(bb.ConfigError) as err:
        bb.Bank.from_yaml(profile(dep_yaml(f'"{name}"')))
    assert name in str(err.value)
    assert any(name in p for p in err.value.problems or [])


def test_c2_client_module_names_load() -> None:  # C2
    bank = bb.Bank.from_yaml(profile(dep_yaml("payments_client"), dep_yaml("email_client")))
    assert bank.dependencies == ["payments_client", "email_client"]


# --- C3 Open fails fast into the declared fallback ---------------------------


def test_c3_error_fallback_raises_with_code_and_never_calls(bank: bb.Bank) -> None:  # C3
    pay = bank["payments_client"]
    trip(pay, "acme")
    called = []
    with pytest.raises(bb.DependencyUnavailable) as err:
        pay.call(lambda: called.append(1), tenant="acme")
    assert called == []
    assert err.value.code == "PAYMENT_UNAVAILABLE"
    assert metric(bank, "payments_client", "acme", "fallback_error_total") == 1
    assert metric(bank, "payments_client", "acme", "rejected_open_total") == 1


def test_c3_degraded_fallback_gets_the_call_arguments(bank: bb.Bank) -> None:  # C3
    email = bank["email_client"]
    fail(email, 4)
    assert email.state() == "open"
    got = email.call(boom, "to@x", subject="hi", fallback=lambda to, subject: f"queued {to} {subject}")
    assert got == "queued to@x hi"
    assert metric(bank, "email_client", "global", "fallback_degraded_total") == 1


def test_c3_stale_fallback_serves_the_last_good_value_per_key(bank: bb.Bank) -> None:  # C3
    rates = bank["rates_client"]
    assert rates.call(lambda: 1.10, cache_key="eur") == 1.10
    assert rates.call(lambda: 0.86, cache_key="gbp") == 0.86
    assert rates.call(lambda: 1.11, cache_key="eur") == 1.11
    fail(rates, 2)
    assert rates.state() == "open"
    assert rates.call(boom, cache_key="eur") == 1.11
    assert rates.call(boom, cache_key="gbp") == 0.86
    assert metric(bank, "rates_client", "global", "fallback_stale_total") == 2


def test_c3_stale_cache_key_none_is_a_key_of_its_own(bank: bb.Bank) -> None:  # C3
    rates = bank["rates_client"]
    rates.call(lambda: "latest")
    fail(rates, 2)
    assert rates.call(boom) == "latest"


def test_c3_a_replaced_or_unused_stale_value_is_released(bank: bb.Bank) -> None:  # C3
    class Value:
        pass

    rates, email = bank["rates_client"], bank["email_client"]
    old, new, unused = Value(), Value(), Value()
    refs = [weakref.ref(old), weakref.ref(unused)]
    rates.cache_put("eur", old)
    email.cache_put("eur", unused)  # not a stale fallback: nothing is kept
    rates.cache_put("eur", new)
    del old, unused
    # A replaced value is dropped once no reader can still see it (the
    # cache's reads never block, so reclamation is deferred, in batches):
    # more replacements let the batch holding it be reclaimed.
    for i in range(1000):
        rates.cache_put("filler", i)
    assert [r() for r in refs] == [None, None]
    trip(rates, failures=2)
    assert rates.call(boom, cache_key="eur") is new


def test_c3_profile_without_fallback_is_rejected() -> None:  # C3
    with pytest.raises(bb.ConfigError, match="fallback"):
        bb.Bank.from_yaml(profile(dep_yaml("payments_client", fallback=None)))


def test_c3_a_served_fallback_is_not_a_success(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C3
    email = bank["email_client"]
    fail(email, 4)
    for _ in range(10):
        email.call(boom, fallback=lambda: "degraded")
    # Still open: serving the fallback recorded nothing as a success.
    assert email.state() == "open"
    m = bank.metrics()["email_client"]["global"]
    assert m["closed_total"] == 0
    assert m["fallback_degraded_total"] == 10


def test_c3_not_admitted_does_not_wait(bank: bb.Bank) -> None:  # C3
    # A listener that blocks forever must not block a rejected call.
    release = threading.Event()
    bank.on_event(lambda ev: release.wait(5))
    pay = bank["payments_client"]
    trip(pay, "acme")
    for _ in range(100):
        with pytest.raises(bb.DependencyUnavailable):
            pay.call(boom, tenant="acme")
    release.set()


# --- C4 Fallback failure ------------------------------------------------------


def test_c4_empty_stale_cache_is_unavailable_with_fields(bank: bb.Bank) -> None:  # C4
    rates = bank["rates_client"]
    fail(rates, 2)
    with pytest.raises(bb.DependencyUnavailable) as err:
        rates.call(boom, cache_key="eur")
    e = err.value
    assert (e.dependency, e.partition, e.code) == ("rates_client", "global", None)
    assert e.retry_after == pytest.approx(10.0)
    assert metric(bank, "rates_client", "global", "fallback_failures_total") == 1


def test_c4_stale_value_older_than_max_staleness_is_not_served(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C4
    rates = bank["rates_client"]
    rates.call(lambda: 1.10, cache_key="eur")
    clock.advance(10 * 60 + 1)  # max_staleness 10m
    fail(rates, 2)
    with pytest.raises(bb.DependencyUnavailable):
        rates.call(boom, cache_key="eur")


def test_c4_degraded_missing_or_raising_is_unavailable(bank: bb.Bank) -> None:  # C4
    email = bank["email_client"]
    fail(email, 4)
    with pytest.raises(bb.DependencyUnavailable) as missing:
        email.call(boom)
    assert missing.value.dependency == "email_client"

    def broken() -> str:
        raise RuntimeError("degraded path broke")

    with pytest.raises(bb.DependencyUnavailable) as raised:
        email.call(boom, fallback=broken)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert raised.value.retry_after is not None and raised.value.retry_after > 0
    assert metric(bank, "email_client", "global", "fallback_failures_total") == 2


def test_c4_partition_is_the_tenant(bank: bb.Bank) -> None:  # C4
    pay = bank["payments_client"]
    trip(pay, "acme")
    with pytest.raises(bb.DependencyUnavailable) as err:
        pay.call(boom, tenant="acme")
    assert err.value.partition == "acme"
    assert err.value.dependency == "payments_client"


# --- C5 Trip policy -------------------------------------------------------


def test_c5_consecutive_failures_trip_at_n_and_success_resets(bank: bb.Bank) -> None:  # C5
    pay = bank["payments_client"]
    fail(pay, 2, "acme")
    pay.call(lambda: "ok", tenant="acme")
    fail(pay, 2, "acme")
    assert pay.state(tenant="acme") == "closed"
    fail(pay, 1, "acme")
    assert pay.state(tenant="acme") == "open"
    assert metric(bank, "payments_client", "acme", "opened_total") == 1
    assert metric(bank, "payments_client", "acme", "failures_total") == 5


def test_c5_failure_rate_needs_min_calls(bank: bb.Bank) -> None:  # C5
    email = bank["email_client"]  # rate 0.5, min_calls 4, window 10s
    fail(email, 3)
    assert email.state() == "closed"  # a rate of 1.0, but 3 calls < min_calls
    fail(email, 1)
    assert email.state() == "open"  # 4 calls, all failed


def test_c5_failure_rate_window_rolls(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C5
    email = bank["email_client"]
    fail(email, 3)
    clock.advance(11)  # the window is 10s: those failures age out
    fail(email, 1)
    assert email.state() == "closed"


def test_c5_window_is_the_failure_rate_policys(bank: bb.Bank) -> None:  # C5
    assert bank["email_client"].window == 10.0
    assert bank["payments_client"].window is None  # consecutive_failures has none


def test_c5_failure_rate_below_threshold_stays_closed(bank: bb.Bank) -> None:  # C5
    email = bank["email_client"]
    for _ in range(3):
        email.call(lambda: None)
        email.call(lambda: None)
        fail(email, 1)
    assert email.state() == "closed"  # 3/9 < 0.5


def test_c5_slow_call_counts_as_failure_even_if_it_returned(
    make_bank, clock: bb.ManualClock
) -> None:  # C5
    bank = make_bank(
        dep_yaml("search_client", isolation="global", trip="{consecutive_failures: 2, slow_call: 2s}")
    )
    search = bank["search_client"]

    def slow() -> str:
        clock.advance(2.0)  # exactly slow_call: counts
        return "late answer"

    assert search.call(slow) == "late answer"
    assert search.call(slow) == "late answer"
    assert search.state() == "open"
    assert metric(bank, "search_client", "global", "failures_total") == 2


def test_c5_fast_call_is_a_success(make_bank, clock: bb.ManualClock) -> None:  # C5
    bank = make_bank(
        dep_yaml("search_client", isolation="global", trip="{consecutive_failures: 1, slow_call: 2s}")
    )
    search = bank["search_client"]

    def quick() -> str:
        clock.advance(1.999)
        return "ok"

    for _ in range(3):
        search.call(quick)
    assert search.state() == "closed"


def test_c5_slow_call_in_with_form(make_bank, clock: bb.ManualClock) -> None:  # C5
    bank = make_bank(
        dep_yaml("search_client", isolation="global", trip="{consecutive_failures: 1, slow_call: 500ms}")
    )
    with bank["search_client"].admit() as d:
        clock.advance(0.5)
    assert d.outcome == "failure"
    assert bank["search_client"].state() == "open"


# --- C6 Open duration -----------------------------------------------------------


def test_c6_open_duration_comes_from_the_profile(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C6
    pay = bank["payments_client"]  # open_duration 30s
    trip(pay, "acme")
    d = pay.admit(tenant="acme")
    assert d.reason == "open" and d.retry_after == pytest.approx(30.0)
    clock.advance(29.5)
    d = pay.admit(tenant="acme")
    assert d.reason == "open" and d.retry_after == pytest.approx(0.5)
    clock.advance(0.5)
    d = pay.admit(tenant="acme")
    assert d.admitted and d.probe
    d.cancelled()


def test_c6_profile_without_open_duration_is_rejected() -> None:  # C6
    with pytest.raises(bb.ConfigError, match="open_duration"):
        bb.Bank.from_yaml(profile(dep_yaml("payments_client", open_duration=None)))


def test_c6_backoff_lengthens_retrips_caps_and_resets(make_bank, clock: bb.ManualClock) -> None:  # C6
    bank = make_bank(
        dep_yaml(
            "payments_client",
            isolation="global",
            trip="{consecutive_failures: 1}",
            open_duration="10s",
            backoff="{multiplier: 2.0, max: 25s}",
            half_open="{probe_budget: 1, success_threshold: 1}",
        )
    )
    pay = bank["payments_client"]
    fail(pay, 1)
    assert pay.admit().retry_after == pytest.approx(10.0)
    clock.advance(10)
    fail(pay, 1)  # the probe fails: re-trip from half-open
    assert pay.admit().retry_after == pytest.approx(20.0)
    clock.advance(20)
    fail(pay, 1)
    assert pay.admit().retry_after == pytest.approx(25.0)  # capped at max
    clock.advance(25)
    pay.call(lambda: "ok")  # the probe succeeds: closed, backoff resets
    assert pay.state() == "closed"
    fail(pay, 1)
    assert pay.admit().retry_after == pytest.approx(10.0)


# --- C7 Half-open probe budget -------------------------------------------------


def test_c7_probe_budget_limits_probes_in_flight(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C7
    pay = bank["payments_client"]  # probe_budget 2
    trip(pay, "acme")
    clock.advance(30)
    p1, p2 = pay.admit(tenant="acme"), pay.admit(tenant="acme")
    assert p1.admitted and p1.probe and p2.admitted and p2.probe
    assert pay.state(tenant="acme") == "half_open"
    third = pay.admit(tenant="acme")
    assert not third.admitted
    assert third.reason == "probe_budget"
    assert third.retry_after is None
    assert third.fallback == bb.Fallback("error", "PAYMENT_UNAVAILABLE")
    assert metric(bank, "payments_client", "acme", "probe_rejects_total") == 1
    p1.cancelled()  # C10: a cancelled probe returns its slot
    p3 = pay.admit(tenant="acme")
    assert p3.admitted and p3.probe
    p2.cancelled()
    p3.cancelled()


def test_c7_probe_budget_rejection_through_call(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C7
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    held = [pay.admit(tenant="acme"), pay.admit(tenant="acme")]
    with pytest.raises(bb.DependencyUnavailable) as err:
        pay.call(lambda: "never", tenant="acme")
    assert err.value.retry_after is None
    for d in held:
        d.cancelled()


def test_c7_probe_from_an_earlier_episode_still_holds_its_slot(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C7, C13
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    old = pay.admit(tenant="acme")  # probe of episode 1, never recorded yet
    pay.admit(tenant="acme").failure()  # the other probe fails: reopen
    assert pay.state(tenant="acme") == "open"
    clock.advance(30)
    new = pay.admit(tenant="acme")
    assert new.admitted and new.probe
    # budget 2, one slot still held by the old probe
    blocked = pay.admit(tenant="acme")
    assert blocked.reason == "probe_budget"
    old.success()  # a late record: frees the slot, counts as late only
    assert metric(bank, "payments_client", "acme", "late_records_total") == 1
    again = pay.admit(tenant="acme")
    assert again.admitted and again.probe
    new.cancelled()
    again.cancelled()


# --- C8 Success threshold -------------------------------------------------------


def test_c8_closes_only_after_success_threshold(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C8
    pay = bank["payments_client"]  # success_threshold 2
    trip(pay, "acme")
    clock.advance(30)
    pay.call(lambda: "ok", tenant="acme")
    assert pay.state(tenant="acme") == "half_open"  # one success is not enough
    pay.call(lambda: "ok", tenant="acme")
    assert pay.state(tenant="acme") == "closed"
    assert metric(bank, "payments_client", "acme", "closed_total") == 1


def test_c8_a_probe_failure_reopens(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C8
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    pay.call(lambda: "ok", tenant="acme")
    fail(pay, 1, "acme")
    assert pay.state(tenant="acme") == "open"
    d = pay.admit(tenant="acme")
    assert d.reason == "open" and d.retry_after == pytest.approx(30.0)
    assert metric(bank, "payments_client", "acme", "opened_total") == 2


# --- C9 Tenant isolation --------------------------------------------------------


def test_c9_one_tenant_never_changes_another(bank: bb.Bank) -> None:  # C9
    pay = bank["payments_client"]
    pay.call(lambda: 1, tenant="globex")
    fail(pay, 2, "globex")
    trip(pay, "acme")
    assert pay.state(tenant="globex") == "closed"
    fail(pay, 1, "globex")  # globex's own count was 2: now 3
    assert pay.state(tenant="globex") == "open"
    assert pay.state(tenant="initech") == "closed"


def test_c9_each_tenant_has_its_own_probe_budget(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C9, C7
    pay = bank["payments_client"]
    trip(pay, "a")
    trip(pay, "b")
    clock.advance(30)
    held = [pay.admit(tenant=t) for t in ("a", "a", "b", "b")]
    assert all(d.admitted and d.probe for d in held)
    assert pay.admit(tenant="a").reason == "probe_budget"
    assert pay.admit(tenant="b").reason == "probe_budget"
    for d in held:
        d.cancelled()


def test_c9_overflow_partition_when_table_is_full_of_outages(make_bank) -> None:  # C9
    bank = make_bank(dep_yaml("payments_client", max_tenants="2", trip="{consecutive_failures: 1}"))
    pay = bank["payments_client"]
    trip(pay, "a", failures=1)
    trip(pay, "b", failures=1)
    pay.call(lambda: "ok", tenant="c")  # no room: routed to <overflow>
    m = partitions(bank, "payments_client")
    assert set(m) == {"a", "b", "<overflow>"}
    assert m["<overflow>"]["partition_overflow_total"] == 1
    # open partitions were not evicted
    assert pay.state(tenant="a") == "open" and pay.state(tenant="b") == "open"


def test_c9_idle_partitions_are_evicted_first(make_bank) -> None:  # C9
    bank = make_bank(dep_yaml("payments_client", max_tenants="2", trip="{consecutive_failures: 1}"))
    pay = bank["payments_client"]
    pay.call(lambda: "ok", tenant="idle")
    trip(pay, "a", failures=1)
    pay.call(lambda: "ok", tenant="new")  # evicts `idle`, not the open `a`
    m = partitions(bank, "payments_client")
    assert set(m) == {"a", "new"}
    assert "<overflow>" not in m


def test_c9_overflow_partition_is_named_in_errors(make_bank) -> None:  # C9, C4
    bank = make_bank(dep_yaml("payments_client", max_tenants="1", trip="{consecutive_failures: 1}"))
    pay = bank["payments_client"]
    trip(pay, "a", failures=1)
    fail(pay, 1, "b")  # no room for b: the overflow partition trips
    assert bank.metrics()["payments_client"]["<overflow>"]["state"] == "open"
    assert pay.state(tenant="a") == "open"
    with pytest.raises(bb.DependencyUnavailable) as served:
        pay.call(boom, tenant="b")
    assert served.value.partition == "<overflow>"
    with pytest.raises(bb.DependencyUnavailable) as entered:
        with pay.admit(tenant="b"):
            pass
    assert entered.value.partition == "<overflow>"
    with pytest.raises(bb.DeadlineExpired) as expired:
        pay.call(boom, tenant="b", deadline=-1)
    assert expired.value.partition == "<overflow>"


def test_c9_breaker_of_a_tenant_with_no_room_is_the_overflow(make_bank) -> None:  # C9
    bank = make_bank(dep_yaml("payments_client", max_tenants="1", trip="{consecutive_failures: 1}"))
    pay = bank["payments_client"]
    trip(pay, "a", failures=1)
    pay.call(lambda: "ok", tenant="b")  # no room: routed to <overflow>
    assert pay.breaker_of("a") == "a"
    assert pay.breaker_of("b") == "<overflow>"


def test_c9_max_tenants_on_a_global_dependency_is_a_profile_error() -> None:  # C9
    with pytest.raises(bb.ConfigError, match="max_tenants"):
        bb.Bank.from_yaml(profile(dep_yaml("rates_client", isolation="global", max_tenants="10")))


def test_c9_tenant_required(bank: bb.Bank) -> None:  # C9
    pay = bank["payments_client"]
    for tenant in (None, ""):
        with pytest.raises(bb.TenantRequired):
            pay.admit(tenant=tenant)
        with pytest.raises(bb.TenantRequired):
            pay.state(tenant=tenant)
        with pytest.raises(ValueError):
            pay.call(lambda: 1, tenant=tenant)


# --- C10 Deadlines ------------------------------------------------------------


def test_c10_expired_deadline_is_not_admitted_not_served_not_counted(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C10
    clock.advance(5)
    pay = bank["payments_client"]
    # acme has a partition, where expired deadlines are counted; one for a
    # tenant without one inserts nothing (C9).
    pay.call(lambda: "ok", tenant="acme")
    with pytest.raises(bb.DeadlineExpired):
        pay.call(lambda: "ok", tenant="newcomer", deadline=4.0)
    assert "newcomer" not in bank.metrics()["payments_client"]
    called = []
    with pytest.raises(bb.DeadlineExpired) as err:
        pay.call(lambda: called.append(1), tenant="acme", deadline=4.0)
    assert called == []
    assert (err.value.dependency, err.value.partition) == ("payments_client", "acme")
    d = pay.admit(tenant="acme", deadline=5.0)  # equal to now: expired
    assert not d.admitted and d.reason == "deadline_expired"
    assert d.fallback is None and d.retry_after is None
    m = bank.metrics()["payments_client"]["acme"]
    assert m["deadline_expired_total"] == 2
    assert m["failures_total"] == 0
    assert m["fallback_error_total"] == 0


def test_c10_expired_deadline_on_open_breaker_is_still_deadline_expired(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C10
    pay = bank["payments_client"]
    trip(pay, "acme")
    with pytest.raises(bb.DeadlineExpired):
        pay.call(boom, tenant="acme", deadline=0.0)


def test_c10_cancelled_counts_neither_way(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]
    fail(pay, 2, "acme")
    for _ in range(5):
        pay.admit(tenant="acme").cancelled()
    fail(pay, 1, "acme")  # 3rd consecutive failure: cancellations did not reset
    assert pay.state(tenant="acme") == "open"
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 5


def test_c10_timeout_after_the_deadline_is_cancelled(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]

    def times_out() -> None:
        clock.advance(2)
        raise TimeoutError("gave up")

    for _ in range(3):
        with pytest.raises(TimeoutError):
            pay.call(times_out, tenant="acme", deadline=clock.now() + 1)
    assert pay.state(tenant="acme") == "closed"
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 3
    assert metric(bank, "payments_client", "acme", "failures_total") == 0


def test_c10_timeout_before_the_deadline_is_a_failure(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]

    def too_slow() -> None:
        raise TimeoutError("dependency too slow")

    for _ in range(2):
        with pytest.raises(TimeoutError):
            pay.call(too_slow, tenant="acme", deadline=clock.now() + 10)
    with pytest.raises(TimeoutError):
        pay.call(too_slow, tenant="acme")  # no deadline at all
    assert pay.state(tenant="acme") == "open"


def test_c10_error_after_deadline_is_still_a_failure(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]

    def late_error() -> None:
        clock.advance(5)
        raise Boom("the dependency answered with an error")

    for _ in range(3):
        with pytest.raises(Boom):
            pay.call(late_error, tenant="acme", deadline=clock.now() + 1)
    assert pay.state(tenant="acme") == "open"


# --- C11 Operator control -------------------------------------------------------


def test_c11_reset_and_force_open_one_partition(bank: bb.Bank) -> None:  # C11
    pay = bank["payments_client"]
    events: list[dict] = []
    done = threading.Event()

    def listen(ev: dict) -> None:
        events.append(ev)
        if len([e for e in events if e["kind"] in ("reset", "forced_open")]) == 2:
            done.set()

    bank.on_event(listen)
    pay.force_open(tenant="acme")
    assert pay.state(tenant="acme") == "forced_open"
    assert pay.state(tenant="globex") == "closed"
    d = pay.admit(tenant="acme")
    assert d.reason == "forced_open" and d.retry_after is None
    pay.reset(tenant="acme")
    assert pay.state(tenant="acme") == "closed"
    assert pay.admit(tenant="acme").admitted
    assert done.wait(5)
    kinds = [(e["kind"], e["partition"]) for e in events if e["kind"] != "transition"]
    assert kinds == [("forced_open", "acme"), ("reset", "acme")]


def test_c11_force_open_all_partitions_includes_new_tenants(bank: bb.Bank) -> None:  # C11
    pay = bank["payments_client"]
    pay.call(lambda: 1, tenant="acme")
    pay.force_open()
    assert pay.state(tenant="acme") == "forced_open"
    assert pay.state(tenant="first-seen-later") == "forced_open"
    with pytest.raises(bb.DependencyUnavailable):
        pay.call(lambda: 1, tenant="first-seen-later")
    pay.reset()
    assert pay.state(tenant="acme") == "closed"
    assert pay.state(tenant="first-seen-later") == "closed"


def test_c11_reset_clears_counters(bank: bb.Bank) -> None:  # C11
    pay = bank["payments_client"]
    fail(pay, 2, "acme")
    pay.reset(tenant="acme")
    fail(pay, 2, "acme")
    assert pay.state(tenant="acme") == "closed"


# --- C12 Clock ------------------------------------------------------------------


def test_c12_a_clock_jump_ends_the_open_period_but_never_closes(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C12
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(10 * 365 * 24 * 3600)
    assert pay.state(tenant="acme") != "closed"
    d = pay.admit(tenant="acme")
    assert d.admitted and d.probe
    d.success()
    assert pay.state(tenant="acme") == "half_open"  # success_threshold 2


def test_c12_manual_clock_is_shared_and_monotonic(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C12
    assert clock.now() == 0.0 and bank.now() == 0.0
    clock.advance(1.5)
    assert bank.now() == 1.5 and bank["payments_client"].now() == 1.5
    assert bank.clock is not None and bank.clock.now() == 1.5
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            clock.advance(bad)
    assert clock.now() == 1.5


def test_c12_system_clock_bank() -> None:  # C12
    bank = bb.Bank.from_yaml(PROFILE)
    assert bank.clock is None
    t0 = bank.now()
    assert t0 >= 0.0 and bank.now() >= t0


# --- C13 Permits ----------------------------------------------------------------


def test_c13_second_outcome_raises_and_changes_nothing(bank: bb.Bank) -> None:  # C13
    pay = bank["payments_client"]
    fail(pay, 2, "acme")
    d = pay.admit(tenant="acme")
    d.success()
    for record in (d.success, d.failure, d.cancelled):
        with pytest.raises(bb.OutcomeAlreadyRecorded):
            record()
    with pytest.raises(RuntimeError):
        d.failure()
    m = bank.metrics()["payments_client"]["acme"]
    assert m["failures_total"] == 2 and m["cancelled_total"] == 0
    fail(pay, 2, "acme")
    assert pay.state(tenant="acme") == "closed"  # the success did reset the count


def test_c13_dropped_decision_is_cancelled_and_frees_its_slot(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C13
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    d1 = pay.admit(tenant="acme")
    d2 = pay.admit(tenant="acme")
    assert d1.probe and d2.probe
    del d1, d2
    gc.collect()
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 2
    d3 = pay.admit(tenant="acme")
    assert d3.admitted and d3.probe
    d3.cancelled()


def test_c13_outcome_from_an_older_generation_is_late(bank: bb.Bank) -> None:  # C13
    pay = bank["payments_client"]
    old = pay.admit(tenant="acme")
    trip(pay, "acme")  # new generation
    pay.reset(tenant="acme")
    old.failure()
    m = bank.metrics()["payments_client"]["acme"]
    assert m["late_records_total"] == 1
    assert m["failures_total"] == 3
    fail(pay, 2, "acme")
    assert pay.state(tenant="acme") == "closed"  # the late failure did not count


def test_c13_recording_on_a_rejected_decision_is_an_error(bank: bb.Bank) -> None:  # C13
    pay = bank["payments_client"]
    trip(pay, "acme")
    d = pay.admit(tenant="acme")
    with pytest.raises(bb.BreakerError, match="not admitted"):
        d.success()


@pytest.mark.parametrize("not_an_exception", [5, "boom", Boom])
def test_c13_finish_with_a_non_exception_raises_and_records_nothing(
    bank: bb.Bank, not_an_exception: object
) -> None:  # C13
    pay = bank["payments_client"]
    d = pay.admit(tenant="acme")
    with pytest.raises(TypeError, match="exception"):
        d.finish(not_an_exception)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exception"):
        d.__exit__(None, not_an_exception, None)  # type: ignore[arg-type]
    assert d.outcome is None
    assert metric(bank, "payments_client", "acme", "failures_total") == 0
    assert d.finish(Boom()) == "failure"  # the permit is still there to record


# --- C14 Metrics ----------------------------------------------------------------

METRIC_NAMES = [
    "state",
    "open_seconds_total",
    "open_episode_seconds",
    "opened_total",
    "half_opened_total",
    "closed_total",
    "rejected_open_total",
    "probe_rejects_total",
    "forced_open_rejects_total",
    "deadline_expired_total",
    "failures_total",
    "cancelled_total",
    "late_records_total",
    "fallback_stale_total",
    "fallback_degraded_total",
    "fallback_error_total",
    "fallback_failures_total",
    "partition_overflow_total",
    "would_trip_total",
    "stuck",
]


def test_c14_metric_names_and_types(bank: bb.Bank) -> None:  # C14
    bank["payments_client"].call(lambda: 1, tenant="acme")
    m = bank.metrics()["payments_client"]["acme"]
    assert list(m) == METRIC_NAMES
    assert m["state"] == "closed"
    assert isinstance(m["open_seconds_total"], float)
    assert isinstance(m["opened_total"], int)
    assert m["stuck"] == 0


def test_c14_time_open_counts_trip_to_close(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C14
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    pay.call(lambda: "ok", tenant="acme")
    clock.advance(5)  # half-open counts too
    m = bank.metrics()["payments_client"]["acme"]
    assert m["open_episode_seconds"] == pytest.approx(35.0)
    pay.call(lambda: "ok", tenant="acme")
    m = bank.metrics()["payments_client"]["acme"]
    assert m["open_seconds_total"] == pytest.approx(35.0)
    assert (m["opened_total"], m["half_opened_total"], m["closed_total"]) == (1, 1, 1)
    clock.advance(100)
    assert bank.metrics()["payments_client"]["acme"]["open_seconds_total"] == pytest.approx(35.0)


def test_c14_prometheus_exposition(bank: bb.Bank) -> None:  # C14
    pay = bank["payments_client"]
    trip(pay, "acme")
    text = bank.prometheus()
    assert 'breakerbank_state{dependency="payments_client",partition="acme",state="open"} 1' in text
    for name in METRIC_NAMES[1:]:
        assert f"breakerbank_{name}" in text
    assert 'breakerbank_failures_total{dependency="payments_client",partition="acme"} 3' in text


def test_c14_fallbacks_counted_by_kind_where_served(bank: bb.Bank) -> None:  # C14
    trip(bank["payments_client"], "acme")
    fail(bank["email_client"], 4)
    trip(bank["rates_client"], failures=2)
    with pytest.raises(bb.DependencyUnavailable):
        bank["payments_client"].call(boom, tenant="acme")
    bank["email_client"].call(boom, fallback=lambda: "d")
    with pytest.raises(bb.DependencyUnavailable):
        bank["rates_client"].call(boom, cache_key="none-yet")
    m = bank.metrics()
    assert m["payments_client"]["acme"]["fallback_error_total"] == 1
    assert m["email_client"]["global"]["fallback_degraded_total"] == 1
    assert m["rates_client"]["global"]["fallback_failures_total"] == 1
    # The `with` form raises, but serves no fallback.
    with pytest.raises(bb.DependencyUnavailable):
        with bank["payments_client"].admit(tenant="acme"):
            pass
    assert bank.metrics()["payments_client"]["acme"]["fallback_error_total"] == 1


# --- C15 Stuck ------------------------------------------------------------------


def test_c15_stuck_when_not_closed_within_recovery_bound(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C15
    stuck_events: list[dict] = []
    seen = threading.Event()

    def listen(ev: dict) -> None:
        if ev["kind"] == "stuck":
            stuck_events.append(ev)
            seen.set()

    bank.on_event(listen)
    rates = bank["rates_client"]  # recovery_bound 1m, open 10s
    trip(rates, failures=2)
    assert bank.stuck() == []
    for _ in range(7):  # keep failing probes for 70 s: re-trips don't restart it
        clock.advance(10)
        fail(rates, 1)
    stuck = bank.stuck()
    assert len(stuck) == 1
    assert stuck[0]["dependency"] == "rates_client" and stuck[0]["partition"] == "global"
    assert stuck[0]["open_for"] == pytest.approx(70.0)
    assert metric(bank, "rates_client", "global", "stuck") == 1
    rates.admit()  # more admissions: the alert is announced only once
    rates.admit()
    assert seen.wait(5)
    clock.advance(10)
    rates.call(lambda: 1)
    assert rates.state() == "closed"
    assert bank.stuck() == []
    assert len(stuck_events) == 1


def test_c15_forced_open_is_not_stuck(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C15
    bank["rates_client"].force_open()
    clock.advance(3600)
    bank["rates_client"].admit()
    assert bank.stuck() == []


# --- C16 Events -----------------------------------------------------------------


def test_c16_transitions_delivered_as_dicts(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C16
    events: list[dict] = []
    closed = threading.Event()

    def listen(ev: dict) -> None:
        events.append(ev)
        if ev["to"] == "closed":
            closed.set()

    assert bank.on_event(listen) is listen
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    pay.call(lambda: 1, tenant="acme")
    pay.call(lambda: 1, tenant="acme")
    assert bank.flush_events(5.0)
    assert closed.is_set()
    assert bank.events_dropped() == 0
    trans = [(e["from"], e["to"]) for e in events if e["kind"] == "transition"]
    assert trans == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
    first = events[0]
    assert set(first) == {"kind", "dependency", "partition", "at", "from", "to"}
    assert (first["dependency"], first["partition"], first["at"]) == ("payments_client", "acme", 0.0)


def test_c16_a_slow_listener_never_slows_admission(bank: bb.Bank) -> None:  # C16
    release = threading.Event()
    got = threading.Event()

    def slow(ev: dict) -> None:
        got.set()
        release.wait(10)

    bank.on_event(slow)
    pay = bank["payments_client"]
    for i in range(50):  # 50 trips, each an event, while the listener is stuck
        trip(pay, f"t{i}")
    assert all(pay.state(tenant=f"t{i}") == "open" for i in range(50))
    release.set()
    assert got.wait(5)


def test_c16_listener_errors_are_reported_not_raised(
    bank: bb.Bank, monkeypatch: pytest.MonkeyPatch
) -> None:  # C16
    reported: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    delivered = threading.Event()

    def bad(ev: dict) -> None:
        raise ValueError("listener bug")

    bank.on_event(bad)
    bank.on_event(lambda ev: delivered.set())
    trip(bank["payments_client"], "acme")
    assert delivered.wait(5)
    assert len(reported) == 1 and isinstance(reported[0], ValueError)


def test_c16_on_event_needs_a_callable(bank: bb.Bank) -> None:  # C16
    with pytest.raises(TypeError):
        bank.on_event(42)  # type: ignore[type-var]


EVENT_THREAD = "breakerbank-ev"  # the dispatcher's name, as /proc truncates it


def event_threads() -> int:
    """The process's live event dispatcher threads (an OS-level count:
    `threading` does not list threads started by Rust)."""
    n = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                n += f.read().startswith(EVENT_THREAD)
        except OSError:  # the thread ended while we looked
            pass
    return n


def settles(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Polls `predicate` until it holds or `timeout` seconds pass."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


needs_proc = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task"), reason="counts threads through /proc"
)


@needs_proc
def test_c16_bank_with_self_referencing_listener_is_collected() -> None:  # C16
    gc.collect()
    baseline = event_threads()

    def make() -> weakref.ref[bb.Bank]:
        bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())

        def listener(ev: dict) -> None:
            bank.metrics()

        bank.on_event(listener)
        return weakref.ref(bank)

    refs = [make() for _ in range(30)]
    # A thread names itself once it runs, so even the count up is polled.
    assert settles(lambda: event_threads() >= baseline + 30)
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 30 banks still alive after gc.collect()"
    assert settles(lambda: event_threads() <= baseline), (
        f"{event_threads() - baseline} event threads still alive"
    )


@needs_proc
def test_c16_listener_closing_over_a_dependency_or_decision_is_collected() -> None:  # C16
    # The bank itself is gone; its dependency and an unrecorded decision keep
    # the core (and so the listener) alive, and the listener keeps them.
    gc.collect()
    baseline = event_threads()

    def make() -> list[weakref.ref[object]]:
        bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())
        pay = bank["payments_client"]
        pending = pay.admit(tenant="acme")
        bank.on_event(lambda ev: (pay.state(tenant="acme"), pending.outcome))
        return [weakref.ref(bank), weakref.ref(pay), weakref.ref(pending)]

    refs = [r for _ in range(10) for r in make()]
    gc.collect()
    alive = [type(o).__name__ for o in (r() for r in refs) if o is not None]
    assert alive == [], f"still alive after gc.collect(): {alive}"
    assert settles(lambda: event_threads() <= baseline), (
        f"{event_threads() - baseline} event threads still alive"
    )



def test_c16_decision_in_a_cycle_through_its_tenant_is_collected() -> None:  # C16
    # A decision keeps the str its caller gave as the tenant; a str subclass
    # can refer back to the decision, and the collector must see that cycle.
    class Tenant(str):
        decision: object

    bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())
    pay = bank["payments_client"]

    def make() -> weakref.ref[bb.Decision]:
        tenant = Tenant("acme")
        decision = pay.admit(tenant=tenant)
        tenant.decision = decision
        return weakref.ref(decision)

    refs = [make() for _ in range(10)]
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 10 decisions still alive after gc.collect()"


@needs_proc
def test_c3_stale_value_referring_to_its_bank_is_collected() -> None:  # C3, C16
    # The stale cache lives in the core, like listeners: a value that refers
    # back to its bank must not keep it (and its event thread) alive.
    gc.collect()
    baseline = event_threads()

    class Quote:
        def __init__(self, bank: bb.Bank) -> None:
            self.bank = bank

    def make() -> weakref.ref[bb.Bank]:
        bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())
        bank.on_event(lambda ev: None)
        rates = bank["rates_client"]
        rates.call(lambda: Quote(bank), cache_key="eur")
        rates.cache_put("gbp", [rates])
        return weakref.ref(bank)

    refs = [make() for _ in range(10)]
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 10 banks still alive after gc.collect()"
    assert settles(lambda: event_threads() <= baseline), (
        f"{event_threads() - baseline} event threads still alive"
    )
