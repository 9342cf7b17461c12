"""Admission from many threads at once (C7, C13)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from conftest import dep_yaml, fail, profile

import breakerbank as bb

THREADS = 8
ROUNDS = 2000
BUDGET = 3


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    # Switch threads as often as the interpreter can, for more interleavings.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def half_open_bank(clock: bb.ManualClock) -> bb.Bank:
    bank = bb.Bank.from_yaml(
        profile(
            dep_yaml(
                "payments_client",
                trip="{consecutive_failures: 1}",
                half_open=f"{{probe_budget: {BUDGET}, success_threshold: 1000}}",
            )
        ),
        clock=clock,
    )
    pay = bank["payments_client"]
    fail(pay, 1, "acme")
    clock.advance(30)
    return bank


def test_c7_eight_threads_never_exceed_the_probe_budget(clock: bb.ManualClock) -> None:  # C7
    bank = half_open_bank(clock)
    pay = bank["payments_client"]
    lock = threading.Lock()
    in_flight = 0
    max_in_flight = 0
    admitted = 0
    rejected: dict[str | None, int] = {}
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        nonlocal in_flight, max_in_flight, admitted
        try:
            start.wait()
            for i in range(ROUNDS):
                d = pay.admit(tenant="acme")
                if not d.admitted:
                    with lock:
                        rejected[d.reason] = rejected.get(d.reason, 0) + 1
                    continue
                assert d.probe
                # Counted strictly inside the permit's lifetime, so this can
                # only under-count what the core holds: any excess is real.
                with lock:
                    in_flight += 1
                    admitted += 1
                    max_in_flight = max(max_in_flight, in_flight)
                for _ in range(i % 3):
                    pass  # hold the slot a little while other threads race
                with lock:
                    in_flight -= 1
                if (n + i) % 2:
                    d.cancelled()  # returns the slot (C10)
                else:
                    del d  # dropped: cancelled, slot returned (C13)
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert 1 <= max_in_flight <= BUDGET
    assert admitted > BUDGET  # slots were returned and reused
    assert set(rejected) <= {"probe_budget"}
    m = bank.metrics()["payments_client"]["acme"]
    assert m["probe_rejects_total"] == rejected.get("probe_budget", 0)
    assert m["cancelled_total"] == admitted
    assert admitted + rejected.get("probe_budget", 0) == THREADS * ROUNDS
    # Nothing leaked: every slot is free again.
    held = [pay.admit(tenant="acme") for _ in range(BUDGET)]
    assert all(d.admitted and d.probe for d in held)
    assert pay.admit(tenant="acme").reason == "probe_budget"
    for d in held:
        d.cancelled()


def test_c7_concurrent_probes_close_exactly_once(clock: bb.ManualClock) -> None:  # C7, C8
    bank = bb.Bank.from_yaml(
        profile(
            dep_yaml(
                "payments_client",
                trip="{consecutive_failures: 1}",
                half_open="{probe_budget: 2, success_threshold: 50}",
            )
        ),
        clock=clock,
    )
    pay = bank["payments_client"]
    fail(pay, 1, "acme")
    clock.advance(30)
    start = threading.Barrier(THREADS)

    def worker() -> None:
        start.wait()
        for _ in range(500):
            try:
                pay.call(lambda: "ok", tenant="acme")
            except bb.DependencyUnavailable:
                pass

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pay.state(tenant="acme") == "closed"
    m = bank.metrics()["payments_client"]["acme"]
    assert (m["opened_total"], m["half_opened_total"], m["closed_total"]) == (1, 1, 1)


def test_c13_many_threads_one_decision_one_outcome(clock: bb.ManualClock) -> None:  # C13
    bank = half_open_bank(clock)
    pay = bank["payments_client"]
    for _ in range(50):
        d = pay.admit(tenant="acme")
        assert d.admitted
        wins: list[str] = []
        start = threading.Barrier(4)

        def record(d: bb.Decision = d, wins: list[str] = wins, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                d.cancelled()
                wins.append("ok")
            except bb.OutcomeAlreadyRecorded:
                pass

        threads = [threading.Thread(target=record) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert wins == ["ok"]
    assert bank.metrics()["payments_client"]["acme"]["cancelled_total"] == 50
