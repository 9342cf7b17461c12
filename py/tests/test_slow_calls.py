"""C10: a call given up after it ran `slow_call` is a slow failure, so a
dependency that hangs trips its breaker, on the system clock as callers
meet it (asyncio.wait_for at the caller's deadline, a sync TimeoutError
after the deadline)."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import dep_yaml, metric, profile

import breakerbank as bb

HUNG = profile(
    dep_yaml(
        "search_client",
        isolation="global",
        trip="{consecutive_failures: 3, slow_call: 20ms}",
    )
)


def test_c10_acall_given_up_by_wait_for_after_slow_call_trips() -> None:
    bank = bb.Bank.from_yaml(HUNG)
    dep = bank["search_client"]

    async def hangs() -> None:
        await asyncio.sleep(3600)

    async def main() -> None:
        for _ in range(3):
            deadline = dep.now() + 0.05
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(dep.acall(hangs, deadline=deadline), 0.05)

    asyncio.run(main())
    assert metric(bank, "search_client", "global", "failures_total") == 3
    assert metric(bank, "search_client", "global", "cancelled_total") == 0
    assert dep.state() == "open"


def test_c10_a_sync_timeout_after_the_deadline_and_slow_call_trips() -> None:
    bank = bb.Bank.from_yaml(HUNG)
    dep = bank["search_client"]

    def client_timeout() -> None:
        time.sleep(0.03)  # the client waited past slow_call and the deadline
        raise TimeoutError("read timed out")

    for _ in range(3):
        with pytest.raises(TimeoutError):
            dep.call(client_timeout, deadline=dep.now() + 0.025)
    assert dep.state() == "open"


def test_c10_given_up_before_slow_call_stays_cancelled() -> None:
    bank = bb.Bank.from_yaml(
        profile(
            dep_yaml(
                "search_client",
                isolation="global",
                trip="{consecutive_failures: 3, slow_call: 10s}",
            )
        )
    )
    dep = bank["search_client"]

    async def hangs() -> None:
        await asyncio.sleep(3600)

    async def main() -> None:
        for _ in range(4):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(dep.acall(hangs), 0.01)

    asyncio.run(main())
    assert metric(bank, "search_client", "global", "cancelled_total") == 4
    assert dep.state() == "closed"
