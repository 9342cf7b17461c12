"""The wrapped call's forms as C17 and C4 want them: misuse refused before it
counts (a coroutine function given to `call`, a `fallback=` the declared
kind never uses), `async with dep.admit()`, and returned values that count
as failures (`classify_ok=` per call, `dep.classify(result=...)`)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from conftest import Boom, boom, dep_yaml, metric, profile, trip

import breakerbank as bb

COUNTERS = (
    "failures_total",
    "cancelled_total",
    "fallback_stale_total",
    "fallback_degraded_total",
    "fallback_error_total",
    "fallback_failures_total",
)


def counters(bank: bb.Bank, dep: str, partition: str) -> dict[str, Any]:
    m = bank.metrics().get(dep, {}).get(partition, {})
    return {k: m.get(k, 0) for k in COUNTERS}


async def fetch(*args: object, **kwargs: object) -> int:
    return 1


# -- C17: a coroutine function given to the synchronous `call` ---------------


def test_c17_call_refuses_a_coroutine_function_and_counts_nothing(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    pay.call(lambda: 1, tenant="acme")  # the partition exists
    before = counters(bank, "payments_client", "acme")
    with warnings.catch_warnings():
        # The coroutine `fetch()` made is closed, never left un-awaited.
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="acall"):
            pay.call(fetch, tenant="acme")
        with pytest.raises(TypeError, match="acall"):
            pay.call_with(fetch, (1,), {"k": 2}, tenant="acme")
    assert counters(bank, "payments_client", "acme") == before
    assert pay.inspect(tenant="acme")["consecutive_failures"] == 0
    assert bank.metrics()["payments_client"]["*"]["calls_total"]["success"] == 1


def test_c17_call_of_a_coroutine_function_takes_no_probe_slot(bank: bb.Bank, clock: bb.ManualClock) -> None:
    rates = bank["rates_client"]
    trip(rates, failures=2)
    clock.advance(10)  # half-open: one probe slot
    with pytest.raises(TypeError, match="acall"):
        rates.call(fetch)
    assert rates.inspect()["probes_in_flight"] == 0
    probe = rates.admit()
    assert probe.admitted and probe.probe, "the probe slot came back"
    probe.success()
    assert rates.state() == "closed"


def test_c17_call_of_a_coroutine_function_on_an_open_breaker_is_refused_at_its_first_admission(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:
    # A refused call never runs its callable, so it cannot tell: it is
    # refused as any call is (the coroutine function is not called, nothing
    # is left un-awaited), and the TypeError comes with the first admission.
    pay = bank["payments_client"]
    trip(pay, "acme")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(bb.DependencyUnavailable):
            pay.call(fetch, tenant="acme")
        with pytest.raises(bb.DeadlineExpired):
            pay.call(fetch, tenant="acme", deadline=pay.now() - 1)
        clock.advance(30)  # half-open: the probe is the first admission
        with pytest.raises(TypeError, match="acall"):
            pay.call(fetch, tenant="acme")
    assert pay.inspect(tenant="acme")["probes_in_flight"] == 0, "its probe slot came back"
    assert pay.state(tenant="acme") == "half_open"


def test_c17_acall_of_a_plain_function_counts_nothing(bank: bb.Bank, clock: bb.ManualClock) -> None:
    rates = bank["rates_client"]
    trip(rates, failures=2)
    clock.advance(10)

    async def main() -> None:
        with pytest.raises(TypeError, match="coroutine"):
            await rates.acall(lambda: 1)

    before = counters(bank, "rates_client", "global")
    asyncio.run(main())
    assert counters(bank, "rates_client", "global") == before, "not even a cancellation"
    assert rates.inspect()["probes_in_flight"] == 0


# -- C17: a fallback argument the declared fallback never uses ---------------


@pytest.mark.parametrize("name", ["payments_client", "rates_client"])
def test_c17_fallback_given_to_an_error_or_stale_dependency_is_refused(bank: bb.Bank, name: str) -> None:
    dep = bank[name]
    tenant = "acme" if dep.isolation == "tenant" else None
    kind = dep.fallback.kind
    with pytest.raises(TypeError, match=f"fallback=.*{kind}"):
        dep.call(lambda: 1, tenant=tenant, fallback=lambda: 2)
    with pytest.raises(TypeError, match=f"fallback=.*{kind}"):
        dep.call_with(lambda: 1, tenant=tenant, fallback=lambda: 2)
    with pytest.raises(TypeError, match=f"fallback=.*{kind}"):
        dep.acall(fetch, tenant=tenant, fallback=lambda: 2)
    with pytest.raises(TypeError, match=f"fallback=.*{kind}"):
        bank.guard(name, tenant_arg="tenant" if tenant else None, fallback=lambda: 2)
    # Refused on an open breaker too: never ignored in favour of the fallback.
    trip(dep, tenant, failures=3 if tenant else 2)
    before = counters(bank, name, tenant or "global")
    with pytest.raises(TypeError, match="fallback="):
        dep.call(lambda: 1, tenant=tenant, fallback=lambda: 2)
    assert counters(bank, name, tenant or "global") == before
    # fallback=None is no fallback argument at all.
    with pytest.raises(bb.DependencyUnavailable):
        dep.call(lambda: 1, tenant=tenant, fallback=None)


def test_c17_fallback_on_a_degraded_dependency_still_serves(bank: bb.Bank) -> None:
    email = bank["email_client"]
    email.trip()
    assert email.call(lambda: 1, fallback=lambda: 2) == 2


# -- C17: `async with dep.admit()` -------------------------------------------


def test_c17_async_with_admit_records_as_the_with_form(bank: bb.Bank, clock: bb.ManualClock) -> None:
    pay = bank["payments_client"]

    async def main() -> None:
        async with pay.admit(tenant="acme") as d:
            assert d.admitted
            await asyncio.sleep(0)
        assert d.outcome == "success"
        with pytest.raises(Boom):
            async with pay.admit(tenant="acme") as d:
                raise Boom()
        assert d.outcome == "failure"
        with pytest.raises(asyncio.CancelledError):
            async with pay.admit(tenant="acme") as d:
                raise asyncio.CancelledError()
        assert d.outcome == "cancelled"
        async with pay.admit(tenant="acme", classify=lambda e: "success") as d:
            pass
        assert d.outcome == "success"

    asyncio.run(main())
    assert metric(bank, "payments_client", "acme", "failures_total") == 1
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 1


def test_c17_async_with_a_refused_admission_raises_on_enter(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    trip(pay, "acme")
    ran = []

    async def main() -> None:
        with pytest.raises(bb.DependencyUnavailable) as e:
            async with pay.admit(tenant="acme"):
                ran.append(1)
        assert e.value.code == "PAYMENT_UNAVAILABLE"
        with pytest.raises(bb.DeadlineExpired):
            async with pay.admit(tenant="globex", deadline=pay.now() - 1):
                ran.append(1)

    asyncio.run(main())
    assert ran == []


def test_c17_async_with_is_the_task_that_gets_cancelled(bank: bb.Bank) -> None:
    pay = bank["payments_client"]

    async def main() -> None:
        started = asyncio.Event()

        async def hangs() -> None:
            async with pay.admit(tenant="acme"):
                started.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(hangs())
        # Bounded only so a broken `async with` fails rather than hangs.
        await asyncio.wait_for(asyncio.shield(started.wait()), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 1
    assert metric(bank, "payments_client", "acme", "failures_total") == 0


# -- C17: returned values that count as failures ---------------------------


def answer(status: str) -> dict[str, str]:
    return {"status": status}


def by_status(v: Any) -> str | None:
    return "failure" if isinstance(v, dict) and v.get("status") == "error" else None


def test_c17_classify_ok_counts_a_returned_value_as_a_failure(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    for _ in range(2):
        assert pay.call(answer, "error", tenant="acme", classify_ok=by_status) == {"status": "error"}
    assert metric(bank, "payments_client", "acme", "failures_total") == 2
    assert pay.call(answer, "ok", tenant="acme", classify_ok=by_status) == {"status": "ok"}
    assert pay.inspect(tenant="acme")["consecutive_failures"] == 0, "None: the default, a success"
    for _ in range(3):
        pay.call_with(answer, ("error",), tenant="acme", classify_ok=by_status)
    assert pay.state(tenant="acme") == "open"

    async def aanswer(status: str) -> dict[str, str]:
        return answer(status)

    async def main() -> None:
        for _ in range(3):
            v = await pay.acall(aanswer, "error", tenant="globex", classify_ok=by_status)
            assert v == {"status": "error"}

    asyncio.run(main())
    assert pay.state(tenant="globex") == "open"


def test_c17_classify_ok_can_count_a_value_as_cancelled(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    pay.call(answer, "busy", tenant="acme", classify_ok=lambda v: "cancelled")
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 1
    assert metric(bank, "payments_client", "acme", "failures_total") == 0


def test_c17_the_dependency_result_rule_and_the_call_that_comes_first(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    pay.classify(result=by_status)
    pay.call(answer, "error", tenant="acme")
    assert metric(bank, "payments_client", "acme", "failures_total") == 1
    # The call's classify_ok comes first; its None leaves it to the rule.
    pay.call(answer, "error", tenant="acme", classify_ok=lambda v: "success")
    assert pay.inspect(tenant="acme")["consecutive_failures"] == 0
    pay.call(answer, "error", tenant="acme", classify_ok=lambda v: None)
    assert metric(bank, "payments_client", "acme", "failures_total") == 2

    @bank.guard("payments_client")
    def guarded(tenant: str) -> dict[str, str]:
        return answer("error")

    @bank.guard("payments_client", classify_ok=lambda v: "success")
    def forgiven(tenant: str) -> dict[str, str]:
        return answer("error")

    guarded("globex")
    forgiven("globex")
    guarded("globex")
    assert metric(bank, "payments_client", "globex", "failures_total") == 2
    assert pay.inspect(tenant="globex")["consecutive_failures"] == 1
    # The result rule does not touch exceptions, nor the exception lists it.
    with pytest.raises(Boom):
        pay.call(boom, tenant="initech")
    assert metric(bank, "payments_client", "initech", "failures_total") == 1
    # Replaced like the rest of the rule; no arguments clears it.
    pay.classify()
    pay.call(answer, "error", tenant="umbrella")
    assert metric(bank, "payments_client", "umbrella", "failures_total") == 0


def test_c17_a_value_counted_as_a_failure_is_not_kept_for_stale(bank: bb.Bank) -> None:
    rates = bank["rates_client"]
    rates.call(lambda: "good", cache_key="EUR")
    rates.call(lambda: "bad", cache_key="EUR", classify_ok=lambda v: "failure" if v == "bad" else None)
    rates.trip()
    assert rates.call(lambda: "unused", cache_key="EUR") == "good"


def test_c17_a_result_classifier_that_fails_is_raised_and_the_default_counts(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    with pytest.raises(ZeroDivisionError):
        pay.call(answer, "error", tenant="acme", classify_ok=lambda v: 1 / 0)
    with pytest.raises(TypeError, match="classify_ok"):
        pay.call(answer, "error", tenant="acme", classify_ok=lambda v: "broken")
    assert metric(bank, "payments_client", "acme", "failures_total") == 0
    with pytest.raises(TypeError, match="classify_ok"):
        pay.call(answer, "error", tenant="acme", classify_ok=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="result="):
        pay.classify(result=5)  # type: ignore[arg-type]


def test_c17_resilience4j_record_result_trips_on_a_failure_rate(clock: bb.ManualClock) -> None:
    # resilience4j's recordResult: `.recordResult(r -> r.equals("error"))`, a
    # count-based window of 4 calls at a 50% threshold: two error answers
    # among four returned values open the breaker, without any exception.
    bank = bb.Bank.from_yaml(
        profile(
            dep_yaml(
                "inventory_client",
                isolation="global",
                trip="{failure_rate: 0.5, min_calls: 4, window: 10s}",
            )
        ),
        clock=clock,
    )
    inv = bank["inventory_client"]
    inv.classify(result=lambda r: "failure" if r == "error" else None)
    for r in ["ok", "error", "ok"]:
        assert inv.call(lambda r=r: r) == r
    assert inv.state() == "closed"
    assert inv.call(lambda: "error") == "error"
    assert inv.state() == "open"
    with pytest.raises(bb.DependencyUnavailable):
        inv.call(lambda: "ok")
