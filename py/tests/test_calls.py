"""The Python surface: call / acall / guard / the with form, the
exception-to-outcome rule, argument errors and the package itself."""

from __future__ import annotations

import asyncio
import gc
import inspect

import pytest
from conftest import PROFILE, Boom, boom, dep_yaml, fail, metric, partitions, trip

import breakerbank as bb

# --- package surface ----------------------------------------------------------------

API_NAMES = {
    "Bank",
    "BreakerError",
    "ConfigError",
    "DeadlineExpired",
    "Decision",
    "Dependency",
    "DependencyUnavailable",
    "Fallback",
    "ManualClock",
    "OutcomeAlreadyRecorded",
    "TenantRequired",
    "UnknownDependency",
}


def test_public_names() -> None:
    assert API_NAMES <= set(bb.__all__)
    for name in bb.__all__:
        assert hasattr(bb, name)


@pytest.mark.parametrize(
    ("exc", "bases"),
    [
        ("ConfigError", (ValueError,)),
        ("UnknownDependency", (KeyError,)),
        ("TenantRequired", (ValueError,)),
        ("DependencyUnavailable", ()),
        ("DeadlineExpired", ()),
        ("OutcomeAlreadyRecorded", (RuntimeError,)),
    ],
)
def test_exception_hierarchy(exc: str, bases: tuple[type, ...]) -> None:
    cls = getattr(bb, exc)
    assert issubclass(cls, bb.BreakerError)
    assert issubclass(bb.BreakerError, Exception)
    for base in bases:
        assert issubclass(cls, base)
    assert cls.__module__ == "breakerbank"


def test_unknown_dependency_is_a_key_error(bank: bb.Bank) -> None:
    with pytest.raises(KeyError) as err:
        bank["GET /pay"]
    assert isinstance(err.value, bb.UnknownDependency)
    assert "payments_client" in str(err.value)  # names what exists
    assert "payments_client" in bank and "nope" not in bank


def test_dependencies_in_profile_order(bank: bb.Bank) -> None:
    assert bank.dependencies == ["payments_client", "email_client", "rates_client"]
    pay = bank["payments_client"]
    assert (pay.name, pay.isolation) == ("payments_client", "tenant")
    assert pay.fallback == bb.Fallback("error", code="PAYMENT_UNAVAILABLE")
    assert bank["rates_client"].fallback.kind == "stale"
    assert "payments_client" in repr(pay)


def test_exceptions_are_raised_fresh_each_time(bank: bb.Bank) -> None:  # C4
    pay = bank["payments_client"]
    trip(pay, "acme")
    seen = []
    for _ in range(3):
        try:
            pay.call(boom, tenant="acme")
        except bb.DependencyUnavailable as e:
            seen.append(e)
    assert len({id(e) for e in seen}) == 3
    depth = []
    for e in seen:
        n, tb = 0, e.__traceback__
        while tb is not None:
            n, tb = n + 1, tb.tb_next
        depth.append(n)
    assert depth[0] == depth[1] == depth[2]


def test_config_error_lists_every_problem() -> None:  # C2, C6
    text = PROFILE.replace("open_duration: 30s", "open_duration: 0s").replace(
        "probe_budget: 1, success_threshold: 1}", "probe_budget: 0, success_threshold: 1}", 1
    )
    with pytest.raises(bb.ConfigError) as err:
        bb.Bank.from_yaml(text)
    problems = err.value.problems or []
    assert len(problems) >= 2
    assert any("payments_client" in p and "open_duration" in p for p in problems)
    assert any("email_client" in p and "probe_budget" in p for p in problems)


def test_load_from_path(tmp_path, clock: bb.ManualClock) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE)
    bank = bb.Bank.load(path, clock=clock)
    assert bank.dependencies[0] == "payments_client"
    assert bb.Bank.load(str(path)).clock is None
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        bb.Bank.load(tmp_path / "missing.yaml")


def test_duplicate_dependency_names_rejected() -> None:  # C2
    doubled = PROFILE + PROFILE.split("dependencies:\n", 1)[1].split("  email_client:")[0]
    with pytest.raises(bb.ConfigError, match="payments_client"):
        bb.Bank.from_yaml(doubled)


# --- dep.call ------------------------------------------------------------------------


def test_call_passes_arguments_and_returns(bank: bb.Bank) -> None:
    pay = bank["payments_client"]

    def charge(order: str, amount: int, *, currency: str = "EUR") -> str:
        return f"{order}:{amount}{currency}"

    assert pay.call(charge, "o-1", 5, tenant="acme") == "o-1:5EUR"
    assert pay.call(charge, "o-2", 7, currency="USD", tenant="acme") == "o-2:7USD"
    kwargs = {"currency": "GBP", "tenant": "acme"}
    assert pay.call(charge, "o-3", 9, **kwargs) == "o-3:9GBP"
    assert kwargs == {"currency": "GBP", "tenant": "acme"}  # the caller's dict is untouched


def test_call_with_keeps_the_functions_own_keywords(bank: bb.Bank) -> None:
    pay = bank["payments_client"]

    def f(tenant: str, fallback: str) -> str:
        return tenant + fallback

    assert pay.call_with(f, (), {"tenant": "x", "fallback": "y"}, tenant="acme") == "xy"
    assert pay.call_with(lambda: 3, tenant="acme") == 3


def test_call_exception_propagates_and_is_a_failure(bank: bb.Bank) -> None:  # C5
    pay = bank["payments_client"]
    with pytest.raises(Boom):
        pay.call(boom, tenant="acme")
    assert metric(bank, "payments_client", "acme", "failures_total") == 1


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError])
def test_call_caller_gave_up_is_cancelled(bank: bb.Bank, exc: type[BaseException]) -> None:  # C10
    pay = bank["payments_client"]

    def give_up() -> None:
        raise exc()

    for _ in range(3):
        with pytest.raises(exc):
            pay.call(give_up, tenant="acme")
    m = bank.metrics()["payments_client"]["acme"]
    assert (m["cancelled_total"], m["failures_total"]) == (3, 0)
    assert pay.state(tenant="acme") == "closed"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"tenant": 42}, TypeError),
        ({"deadline": "soon"}, TypeError),
        ({"deadline": float("nan")}, ValueError),
        ({"fallback": 3}, TypeError),
        ({"cache_key": 1}, TypeError),
    ],
)
def test_call_bad_options_are_clear_errors(bank: bb.Bank, kwargs: dict, error: type) -> None:
    with pytest.raises(error) as err:
        bank["payments_client"].call(lambda: 1, **kwargs)
    assert next(iter(kwargs)) in str(err.value)


def test_call_needs_a_callable(bank: bb.Bank) -> None:
    with pytest.raises(TypeError, match="callable"):
        bank["payments_client"].call()


def test_c17_a_non_callable_is_refused_before_admission(make_bank) -> None:  # C17
    bank = make_bank(dep_yaml("payments_client", trip="{consecutive_failures: 1}"))
    pay = bank["payments_client"]
    with pytest.raises(TypeError, match="callable"):
        pay.call(5, tenant="acme")
    with pytest.raises(TypeError, match="callable"):
        pay.call_with(5, tenant="acme")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        pay.acall(5, tenant="acme")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        pay.acall_with(5, tenant="acme")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        bank.guard("payments_client")(5)
    # Never admitted: no partition, nothing counted, the breaker still closed.
    assert pay.state(tenant="acme") == "closed"
    assert "acme" not in bank.metrics()["payments_client"]
    assert pay.call(lambda: "ok", tenant="acme") == "ok"


def test_c17_a_non_callable_takes_no_probe_slot(make_bank, clock: bb.ManualClock) -> None:  # C17, C7
    bank = make_bank(
        dep_yaml(
            "payments_client",
            trip="{consecutive_failures: 1}",
            half_open="{probe_budget: 1, success_threshold: 1}",
        )
    )
    pay = bank["payments_client"]
    fail(pay, 1, "acme")
    clock.advance(30)
    with pytest.raises(TypeError, match="callable"):
        pay.call(5, tenant="acme")
    assert pay.call(lambda: "ok", tenant="acme") == "ok"  # the one probe was still free
    assert pay.state(tenant="acme") == "closed"


def test_deadline_in_the_future_is_admitted(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    assert bank["payments_client"].call(lambda: 1, tenant="a", deadline=clock.now() + 0.001) == 1
    assert bank["payments_client"].call(lambda: 1, tenant="a", deadline=float("inf")) == 1


# --- the with form ----------------------------------------------------------------------


def test_with_records_success(bank: bb.Bank) -> None:  # C13
    pay = bank["payments_client"]
    fail(pay, 2, "acme")
    with pay.admit(tenant="acme") as d:
        assert d.admitted and not d.probe
    assert d.outcome == "success"
    fail(pay, 2, "acme")
    assert pay.state(tenant="acme") == "closed"


def test_with_records_the_exception_rule(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]
    with pytest.raises(Boom):
        with pay.admit(tenant="acme") as d:
            raise Boom()
    assert d.outcome == "failure"
    with pytest.raises(TimeoutError):
        with pay.admit(tenant="acme", deadline=clock.now() + 1) as d2:
            clock.advance(1)
            raise TimeoutError()
    assert d2.outcome == "cancelled"
    with pytest.raises(KeyboardInterrupt):
        with pay.admit(tenant="acme") as d3:
            raise KeyboardInterrupt()
    assert d3.outcome == "cancelled"


def test_with_manual_outcome_inside_the_block_stands(bank: bb.Bank) -> None:  # C13
    pay = bank["payments_client"]
    with pay.admit(tenant="acme") as d:
        d.failure()
    assert d.outcome == "failure"
    assert metric(bank, "payments_client", "acme", "failures_total") == 1


def test_with_not_admitted_raises_on_enter(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C3, C10
    pay = bank["payments_client"]
    trip(pay, "acme")
    body = []
    with pytest.raises(bb.DependencyUnavailable) as err:
        with pay.admit(tenant="acme"):
            body.append(1)
    assert body == []
    assert err.value.code == "PAYMENT_UNAVAILABLE" and err.value.retry_after == pytest.approx(30)
    clock.advance(1)
    with pytest.raises(bb.DeadlineExpired):
        with pay.admit(tenant="acme", deadline=0.5):
            body.append(1)
    assert body == []


def test_finish_applies_the_rule(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]
    assert pay.admit(tenant="a").finish() == "success"
    assert pay.admit(tenant="a").finish(Boom()) == "failure"
    assert pay.admit(tenant="a").finish(asyncio.CancelledError()) == "cancelled"
    assert pay.admit(tenant="a").finish(TimeoutError()) == "failure"
    assert pay.admit(tenant="a", deadline=clock.now()).reason == "deadline_expired"


def test_serve_fallback_on_a_decision(bank: bb.Bank) -> None:  # C3, C4
    email = bank["email_client"]
    fail(email, 4)
    d = email.admit()
    assert d.serve_fallback(lambda x: x * 2, (21,)) == 42
    ok = email.admit()
    assert not ok.admitted
    with pytest.raises(bb.DependencyUnavailable):
        ok.serve_fallback()
    bank["payments_client"].call(lambda: 1, tenant="a")
    admitted = bank["payments_client"].admit(tenant="a")
    with pytest.raises(ValueError, match="admitted"):
        admitted.serve_fallback()
    admitted.success()


def test_decision_repr_and_fields(bank: bb.Bank) -> None:
    pay = bank["payments_client"]
    d = pay.admit(tenant="a")
    assert "admitted=True" in repr(d) and d.reason is None and d.fallback is None
    assert d.retry_after is None and d.outcome is None
    d.success()
    trip(pay, "a")
    r = pay.admit(tenant="a")
    assert "reason=" in repr(r)


# --- acall --------------------------------------------------------------------------------


def test_acall_success_and_failure(bank: bb.Bank) -> None:  # C5
    pay = bank["payments_client"]

    async def charge(amount: int, currency: str = "EUR") -> str:
        await asyncio.sleep(0)
        return f"{amount}{currency}"

    async def main() -> None:
        assert await pay.acall(charge, 5, currency="USD", tenant="acme") == "5USD"
        with pytest.raises(Boom):
            await pay.acall(_async_boom, tenant="acme")

    asyncio.run(main())
    assert metric(bank, "payments_client", "acme", "failures_total") == 1


async def _async_boom(*args: object, **kwargs: object) -> None:
    await asyncio.sleep(0)
    raise Boom()


def test_acall_task_cancellation_is_recorded_as_cancelled(bank: bb.Bank) -> None:  # C10
    pay = bank["payments_client"]
    fail(pay, 2, "acme")

    async def main() -> None:
        started = asyncio.Event()

        async def hangs() -> None:
            started.set()
            await asyncio.Event().wait()

        task = asyncio.create_task(pay.acall(hangs, tenant="acme"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    m = bank.metrics()["payments_client"]["acme"]
    assert (m["cancelled_total"], m["failures_total"]) == (1, 2)
    fail(pay, 1, "acme")  # cancellation did not reset the consecutive count
    assert pay.state(tenant="acme") == "open"


def test_acall_wait_for_timeout_past_deadline_is_cancelled(bank: bb.Bank, clock: bb.ManualClock) -> None:  # C10
    pay = bank["payments_client"]

    async def slow() -> None:
        clock.advance(1)  # the deadline passes on the bank's clock
        await asyncio.Event().wait()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pay.acall(slow, tenant="acme", deadline=clock.now() + 0.5), 0.01)

    asyncio.run(main())
    assert metric(bank, "payments_client", "acme", "cancelled_total") == 1


def test_acall_fallbacks(bank: bb.Bank) -> None:  # C3, C4
    email, rates, pay = bank["email_client"], bank["rates_client"], bank["payments_client"]

    async def value(v: object) -> object:
        return v

    async def main() -> None:
        assert await rates.acall(value, 1.25, cache_key="eur") == 1.25
        fail(rates, 2)
        assert await rates.acall(_async_boom, cache_key="eur") == 1.25
        fail(email, 4)

        async def degraded(to: str) -> str:
            await asyncio.sleep(0)
            return f"queued {to}"

        assert await email.acall(_async_boom, "x@y", fallback=degraded) == "queued x@y"
        assert await email.acall(_async_boom, "x@y", fallback=lambda to: "sync " + to) == "sync x@y"

        async def broken(to: str) -> str:
            raise RuntimeError("no queue")

        with pytest.raises(bb.DependencyUnavailable) as err:
            await email.acall(_async_boom, "x@y", fallback=broken)
        assert isinstance(err.value.__cause__, RuntimeError)
        trip(pay, "acme")
        with pytest.raises(bb.DependencyUnavailable):
            await pay.acall(_async_boom, tenant="acme")
        with pytest.raises(bb.DeadlineExpired):
            await pay.acall(_async_boom, tenant="acme", deadline=-1.0)

    asyncio.run(main())
    m = bank.metrics()
    assert m["email_client"]["global"]["fallback_degraded_total"] == 2
    assert m["email_client"]["global"]["fallback_failures_total"] == 1
    assert m["rates_client"]["global"]["fallback_stale_total"] == 1


def test_acall_needs_a_coroutine_function(bank: bb.Bank) -> None:
    pay = bank["payments_client"]

    async def main() -> None:
        with pytest.raises(TypeError, match="coroutine"):
            await pay.acall(lambda: 1, tenant="acme")

    asyncio.run(main())
    assert metric(bank, "payments_client", "acme", "failures_total") == 0


class _Suspend:
    """An awaitable that suspends once (yields "tick"), then returns "resumed"."""

    def __await__(self):  # type: ignore[no-untyped-def]
        yield "tick"
        return "resumed"


async def _waits() -> object:
    return await _Suspend()


def _half_open(bank: bb.Bank, clock: bb.ManualClock) -> bb.Dependency:
    """payments_client for acme, half-open (probe budget 2)."""
    pay = bank["payments_client"]
    trip(pay, "acme")
    clock.advance(30)
    return pay


def _probes(pay: bb.Dependency) -> object:
    return pay.inspect("acme")["probes_in_flight"]


def test_c13_acall_is_a_coroutine_admitted_when_first_awaited(bank: bb.Bank, clock: bb.ManualClock) -> None:
    pay = _half_open(bank, clock)
    c = pay.acall(_waits, tenant="acme")
    assert asyncio.iscoroutine(c)
    assert _probes(pay) == 0  # nothing admitted before it is awaited
    with pytest.raises(TypeError, match="non-None value to a just-started coroutine"):
        c.send(1)
    assert _probes(pay) == 0
    assert c.send(None) == "tick"
    assert _probes(pay) == 1
    with pytest.raises(StopIteration) as stop:
        c.send(None)
    assert stop.value.value == "resumed"
    assert _probes(pay) == 0
    assert pay.inspect("acme")["half_open_successes"] == 1
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        c.send(None)
    c.close()  # finished: nothing to do


def test_acall_never_awaited_warns_and_admits_nothing(bank: bb.Bank, clock: bb.ManualClock) -> None:
    pay = _half_open(bank, clock)
    with pytest.warns(RuntimeWarning, match="never awaited"):
        pay.acall(_waits, tenant="acme")
        gc.collect()
    assert _probes(pay) == 0


def test_c13_acall_closed_or_dropped_while_suspended_records_cancelled_once(
    bank: bb.Bank, clock: bb.ManualClock
) -> None:
    pay = _half_open(bank, clock)
    c = pay.acall(_waits, tenant="acme")
    assert c.send(None) == "tick"
    c.close()
    c.close()
    assert (_probes(pay), metric(bank, "payments_client", "acme", "cancelled_total")) == (0, 1)
    d = pay.acall(_waits, tenant="acme")
    assert d.send(None) == "tick"
    del d
    gc.collect()
    assert (_probes(pay), metric(bank, "payments_client", "acme", "cancelled_total")) == (0, 2)
    assert pay.state(tenant="acme") == "half_open"


def test_c13_acall_in_a_reference_cycle_is_collected_and_cancelled(bank: bb.Bank, clock: bb.ManualClock) -> None:
    pay = _half_open(bank, clock)

    async def keeps(box: list[object]) -> object:
        return await _Suspend()

    box: list[object] = []
    c = pay.acall(keeps, box, tenant="acme")
    box.append(c)  # the awaitable refers to box through its arguments
    assert c.send(None) == "tick"
    del box, c
    gc.collect()
    assert (_probes(pay), metric(bank, "payments_client", "acme", "cancelled_total")) == (0, 1)


def test_c17_acall_throw_reaches_the_awaited_call(bank: bb.Bank, clock: bb.ManualClock) -> None:
    pay = _half_open(bank, clock)
    # Thrown before it started: raised at once, nothing admitted, and done.
    c = pay.acall(_waits, tenant="acme")
    with pytest.raises(KeyError):
        c.throw(KeyError("early"))
    assert _probes(pay) == 0
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        c.send(None)

    async def handles() -> object:
        try:
            return await _Suspend()
        except KeyError:
            return "handled"

    # Thrown while suspended: the call handles it and returns (a success).
    h = pay.acall(handles, tenant="acme")
    assert h.send(None) == "tick"
    with pytest.raises(StopIteration) as stop:
        h.throw(KeyError("k"))
    assert stop.value.value == "handled"
    assert pay.inspect("acme")["half_open_successes"] == 1
    # Or lets it out: the exception rule counts it (a failure reopens).
    f = pay.acall(_waits, tenant="acme")
    assert f.send(None) == "tick"
    with pytest.raises(Boom):
        f.throw(Boom("thrown"))
    assert pay.state(tenant="acme") == "open"


def test_acall_awaits_an_awaitable_that_is_not_a_coroutine(bank: bb.Bank, clock: bb.ManualClock) -> None:
    pay = _half_open(bank, clock)
    c = pay.acall(_Suspend, tenant="acme")
    assert c.send(None) == "tick"
    assert _probes(pay) == 1
    with pytest.raises(StopIteration) as stop:
        c.send(None)
    assert stop.value.value == "resumed"
    assert pay.inspect("acme")["half_open_successes"] == 1

    async def sleeps(t: str) -> str:
        await asyncio.sleep(0)
        return t

    async def main() -> list[object]:
        return list(await asyncio.gather(*(pay.acall(sleeps, t, tenant=t) for t in ("a", "b"))))

    assert asyncio.run(main()) == ["a", "b"]


# --- guard --------------------------------------------------------------------------------


def test_guard_sync_reads_the_tenant_argument(bank: bb.Bank) -> None:  # C9
    calls = []

    @bank.guard("payments_client")
    def charge(order: str, tenant: str, amount: int = 1) -> str:
        calls.append(tenant)
        if amount < 0:
            raise Boom()
        return f"{tenant}:{order}:{amount}"

    assert charge.__name__ == "charge"
    assert charge("o1", "acme", amount=3) == "acme:o1:3"
    assert charge("o2", tenant="globex") == "globex:o2:1"
    for _ in range(3):
        with pytest.raises(Boom):
            charge("o3", "acme", -1)
    assert bank["payments_client"].state(tenant="acme") == "open"
    assert bank["payments_client"].state(tenant="globex") == "closed"
    with pytest.raises(bb.DependencyUnavailable):
        charge("o4", "acme")
    assert calls.count("acme") == 4


def test_guard_async_with_fallback_and_cache_key(bank: bb.Bank) -> None:  # C3
    @bank.guard("rates_client", tenant_arg=None, cache_key=lambda currency: currency)
    async def rate(currency: str) -> float:
        if currency == "bad":
            raise Boom()
        return {"eur": 1.1, "gbp": 0.85}[currency]

    @bank.guard("email_client", tenant_arg=None, fallback=lambda to: f"queued {to}")
    async def send(to: str) -> str:
        raise Boom()

    assert inspect.iscoroutinefunction(rate)

    async def main() -> None:
        assert await rate("eur") == 1.1
        assert await rate("gbp") == 0.85
        for _ in range(2):
            with pytest.raises(Boom):
                await rate("bad")
        assert await rate("eur") == 1.1  # stale, from the cache
        for _ in range(4):
            with pytest.raises(Boom):
                await send("a@b")
        assert await send("a@b") == "queued a@b"

    asyncio.run(main())
    assert metric(bank, "rates_client", "global", "fallback_stale_total") == 1


def test_guard_method_and_keyword_only_tenant(bank: bb.Bank) -> None:
    class Client:
        @bank.guard("payments_client", tenant_arg="account")
        def charge(self, amount: int, *, account: str) -> int:
            return amount

    assert Client().charge(5, account="acme") == 5
    assert "acme" in bank.metrics()["payments_client"]


def test_guard_errors_at_decoration(bank: bb.Bank) -> None:
    with pytest.raises(bb.UnknownDependency):
        bank.guard("nope")
    with pytest.raises(TypeError, match="tenant"):

        @bank.guard("payments_client")
        def no_tenant(order: str) -> None: ...

    with pytest.raises(TypeError, match="tenant_arg"):
        bank.guard("payments_client", tenant_arg=None)(lambda: 1)
    with pytest.raises(TypeError, match="cache_key"):
        bank.guard("rates_client", cache_key="eur")  # type: ignore[arg-type]


@pytest.mark.parametrize("tenant", [5, b"acme", ("acme",)])
def test_c9_guard_refuses_a_tenant_that_is_not_a_str(bank: bb.Bank, tenant: object) -> None:  # C9
    calls: list[object] = []

    @bank.guard("payments_client")
    def charge(tenant: object) -> int:
        calls.append(tenant)
        return 1

    @bank.guard("payments_client")
    async def acharge(tenant: object) -> int:
        calls.append(tenant)
        return 1

    pay = bank["payments_client"]
    with pytest.raises(TypeError, match="tenant must be a str or None, got"):
        pay.call(lambda: 1, tenant=tenant)
    with pytest.raises(TypeError, match="tenant must be a str or None, got"):
        charge(tenant)
    with pytest.raises(TypeError, match="tenant must be a str or None, got"):
        asyncio.run(acharge(tenant=tenant))
    # Refused before admission: nothing called, no partition such as "5".
    assert calls == []
    assert partitions(bank, "payments_client") == {}


def test_guard_missing_tenant_at_call_is_tenant_required(bank: bb.Bank) -> None:  # C9
    @bank.guard("payments_client")
    def charge(tenant: str | None = None) -> int:
        return 1

    with pytest.raises(bb.TenantRequired):
        charge()
    assert charge(tenant="acme") == 1


def test_c4_dependency_unavailable_reads_as_an_exception_built_from_its_message(
    bank: bb.Bank,
) -> None:
    # The message and attributes are made when read: they read as they
    # would on an exception built from the message with its attributes set.
    import copy
    import pickle

    pay = bank["payments_client"]
    trip(pay, "acme")
    with pytest.raises(bb.DependencyUnavailable) as err:
        pay.call(lambda: 1, tenant="acme")
    e = err.value
    msg = "dependency `payments_client` is unavailable for partition `acme` (PAYMENT_UNAVAILABLE); retry after 30.000s"
    assert str(e) == msg and e.args == (msg,)
    assert repr(e) == f"DependencyUnavailable({msg!r})"
    assert (e.dependency, e.partition, e.code, e.retry_after) == ("payments_client", "acme", "PAYMENT_UNAVAILABLE", 30.0)
    for again in (pickle.loads(pickle.dumps(e)), copy.copy(e)):
        assert type(again) is bb.DependencyUnavailable and str(again) == msg
        assert (again.partition, again.code, again.retry_after) == ("acme", "PAYMENT_UNAVAILABLE", 30.0)
    e.code = "MINE"
    assert e.code == "MINE" and e.dependency == "payments_client"
    plain = bb.DependencyUnavailable("by hand")
    assert str(plain) == "by hand" and plain.args == ("by hand",) and plain.code is None
    assert bb.DependencyUnavailable.code is None
