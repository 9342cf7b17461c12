"""C17: what counts as a failure is the caller's call: `dep.classify(...)`
per dependency, `classify=` per call, the exception rule by default."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import Boom, boom, metric, trip

import breakerbank as bb


class NotFound(Exception):
    """An expected answer, not an outage."""


class Retry(Exception):
    """The caller gave up on purpose."""


def raise_(exc: BaseException) -> Any:
    raise exc


def counts(bank: bb.Bank, dep: str, partition: str) -> tuple[Any, Any]:
    return metric(bank, dep, partition, "failures_total"), metric(
        bank, dep, partition, "cancelled_total"
    )


def test_c17_the_dependency_rule_takes_types_and_predicates(bank: bb.Bank) -> None:  # C17
    pay = bank["payments_client"]
    pay.classify(success=NotFound, cancelled=lambda e: isinstance(e, Retry))
    for _ in range(5):
        # An exception counted as success still reaches the caller (as
        # pybreaker's `exclude`): only the breaker's count changes.
        with pytest.raises(NotFound):
            pay.call(raise_, NotFound("user 7"), tenant="acme")
        with pytest.raises(Retry):
            pay.call(raise_, Retry(), tenant="acme")
    assert pay.state(tenant="acme") == "closed"
    assert counts(bank, "payments_client", "acme") == (0, 5)
    # Anything else follows the default rule: a failure.
    for _ in range(3):
        with pytest.raises(Boom):
            pay.call(boom, tenant="acme")
    assert pay.state(tenant="acme") == "open"


def test_c17_failure_wins_over_cancelled_which_wins_over_success(bank: bb.Bank) -> None:  # C17
    class ServerError(NotFound):
        pass

    pay = bank["payments_client"]
    pay.classify(
        success=(NotFound, Retry), cancelled=(Retry,), failure=lambda e: isinstance(e, ServerError)
    )
    d = pay.admit(tenant="acme")
    assert d.finish(ServerError()) == "failure"
    d = pay.admit(tenant="acme")
    assert d.finish(Retry()) == "cancelled"
    d = pay.admit(tenant="acme")
    assert d.finish(NotFound()) == "success"
    # A new rule replaces the old; no arguments clears it.
    pay.classify(cancelled=NotFound)
    assert pay.admit(tenant="acme").finish(NotFound()) == "cancelled"
    pay.classify()
    assert pay.admit(tenant="acme").finish(NotFound()) == "failure"


def test_c17_the_default_rule_applies_when_no_classifier_matches(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C17, C10
    pay = bank["payments_client"]
    pay.classify(success=NotFound)
    assert pay.admit(tenant="acme").finish(KeyboardInterrupt()) == "cancelled"
    d = pay.admit(tenant="acme", deadline=clock.now() + 1)
    clock.advance(2)
    assert d.finish(TimeoutError()) == "cancelled"
    assert pay.admit(tenant="acme").finish(TimeoutError()) == "failure"
    # A rule can say otherwise about a cancellation too.
    pay.classify(failure=KeyboardInterrupt)
    assert pay.admit(tenant="acme").finish(KeyboardInterrupt()) == "failure"


def test_c17_a_call_classifier_comes_first_on_every_wrapped_form(bank: bb.Bank) -> None:  # C17
    pay = bank["payments_client"]
    pay.classify(success=NotFound)

    def as_failure(e: BaseException) -> str:
        return "failure"

    def as_cancelled(e: BaseException) -> str | None:
        return "cancelled" if isinstance(e, Boom) else None

    with pytest.raises(NotFound):
        pay.call(raise_, NotFound(), tenant="a", classify=as_failure)
    with pytest.raises(NotFound):
        pay.call_with(raise_, (NotFound(),), tenant="b", classify=as_failure)
    assert counts(bank, "payments_client", "a") == (1, 0)
    assert counts(bank, "payments_client", "b") == (1, 0)
    # None leaves it to the dependency's rule, then the default.
    with pytest.raises(NotFound):
        pay.call(raise_, NotFound(), tenant="c", classify=as_cancelled)
    with pytest.raises(Boom):
        pay.call(boom, tenant="c", classify=as_cancelled)
    assert counts(bank, "payments_client", "c") == (0, 1)

    async def coro_boom() -> None:
        raise Boom()

    async def main() -> None:
        with pytest.raises(Boom):
            await pay.acall(coro_boom, tenant="d", classify=as_cancelled)
        with pytest.raises(Boom):
            await pay.acall_with(coro_boom, tenant="d", classify=as_cancelled)

    asyncio.run(main())
    assert counts(bank, "payments_client", "d") == (0, 2)

    @bank.guard("payments_client", classify=as_cancelled)
    def guarded(tenant: str) -> None:
        raise Boom()

    @bank.guard("payments_client", classify=as_cancelled)
    async def aguarded(tenant: str) -> None:
        raise Boom()

    with pytest.raises(Boom):
        guarded("e")
    with pytest.raises(Boom):
        asyncio.run(aguarded("e"))
    assert counts(bank, "payments_client", "e") == (0, 2)

    # The with form: the admission's classify.
    with pytest.raises(Boom), pay.admit(tenant="f", classify=as_cancelled) as d:
        raise Boom()
    assert d.outcome == "cancelled"
    with pytest.raises(NotFound), pay.admit(tenant="f") as d:
        raise NotFound()
    assert d.outcome == "success"
    assert counts(bank, "payments_client", "f") == (0, 1)


def test_c17_a_classifier_that_fails_is_raised_and_the_default_counts(bank: bb.Bank) -> None:  # C17
    pay = bank["payments_client"]

    def broken(e: BaseException) -> str:
        raise RuntimeError("classifier bug")

    with pytest.raises(RuntimeError, match="classifier bug") as info:
        pay.call(boom, tenant="acme", classify=broken)
    assert isinstance(info.value.__context__, Boom)
    with pytest.raises(TypeError, match="must return") as bad:
        pay.call(boom, tenant="acme", classify=lambda e: "ignored")
    assert isinstance(bad.value.__context__, Boom)
    assert counts(bank, "payments_client", "acme") == (2, 0)
    pay.classify(success=lambda e: 1 / 0)
    with pytest.raises(ZeroDivisionError), pay.admit(tenant="globex"):
        raise Boom()
    assert counts(bank, "payments_client", "globex") == (1, 0)


def test_c17_bad_rules_and_classifiers_are_refused_up_front(bank: bb.Bank) -> None:  # C17
    pay = bank["payments_client"]
    with pytest.raises(TypeError, match="success="):
        pay.classify(success=(NotFound, "not a type"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="failure="):
        pay.classify(failure=int)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="classify"):
        pay.admit(tenant="acme", classify=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="classify"):
        bank.guard("payments_client", classify="nope")  # type: ignore[arg-type]
    assert "acme" not in bank.metrics().get("payments_client", {})


def test_c17_a_call_refused_before_admission_counts_against_nothing(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:  # C17
    rates = bank["rates_client"]
    trip(rates, failures=2)
    clock.advance(10)  # half-open: one probe slot
    before = bank.metrics()["rates_client"]["global"]
    with pytest.raises(TypeError):
        rates.call(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rates.call_with("not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rates.call(lambda: 1, classify=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rates.call_with(lambda: 1, classify=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rates.acall(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rates.acall(lambda: 1, classify=5)  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError):
        bank.guard("rates_client")(5)  # type: ignore[type-var]
    assert bank.metrics()["rates_client"]["global"] == before, "no counter moved"
    assert rates.inspect()["probes_in_flight"] == 0
    probe = rates.admit()
    assert probe.admitted and probe.probe, "the probe budget is untouched"
    probe.success()
    assert rates.state() == "closed"
