"""C9: tenant ids that name no partition are refused with InvalidTenant.

The reserved partition names (`global`, `<overflow>`, `*`), ids holding a
control character (NUL included) and strings that are not valid UTF-8 (a
lone surrogate) are refused by every form that takes a tenant, with a
message saying what is wrong, and count against nothing: no tenant can
pass for the overflow in metrics or Prometheus text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import breakerbank as bb

REFUSED = [
    ("global", ["`global`", "reserved"]),
    ("<overflow>", ["`<overflow>`", "reserved"]),
    ("*", ["`*`", "reserved"]),
    ("\0", ["control character", "U+0000"]),
    ("ac\0me", ["control character", "at byte 2"]),
    ("line\nbreak", ["control character", "U+000A"]),
    ("\x1b[31mred", ["control character", "U+001B"]),
    ("c1\x85", ["control character", "U+0085"]),
    ("\udc80", ["not valid UTF-8"]),
    ("ab\ud800cd", ["not valid UTF-8", "byte 2"]),
]


@pytest.mark.parametrize(("tenant", "says"), REFUSED)
def test_c9_reserved_control_and_surrogate_ids_are_invalid_tenants(
    bank: bb.Bank, tenant: str, says: list[str]
) -> None:  # C9
    events: list[dict[str, object]] = []
    bank.on_event(events.append)
    pay = bank["payments_client"]
    pay.call(lambda: 1, tenant="acme")
    before = sorted(bank.prometheus().splitlines())
    guarded = bank.guard("payments_client")(lambda tenant: 1)
    calls: list[Callable[[], object]] = [
        lambda: pay.admit(tenant=tenant),
        lambda: pay.state(tenant),
        lambda: pay.inspect(tenant),
        lambda: pay.call(lambda: 1, tenant=tenant),
        lambda: pay.call_with(lambda: 1, tenant=tenant),
        lambda: asyncio.run(pay.acall(asyncio.sleep, 0, tenant=tenant)),
        lambda: guarded(tenant=tenant),
        lambda: pay.reset(tenant),
        lambda: pay.force_open(tenant),
        lambda: pay.trip(tenant),
        lambda: pay.half_open(tenant),
    ]
    for call in calls:
        with pytest.raises(bb.InvalidTenant) as err:
            call()
        assert isinstance(err.value, bb.BreakerError)
        assert isinstance(err.value, ValueError)
        for part in says:
            assert part in str(err.value), (part, str(err.value))
        assert err.value.dependency == "payments_client"
    assert bank.flush_events(2)
    assert [e for e in events if e["partition"] != "acme"] == []
    # Partitions by name, and the dependency's totals under `*`.
    assert set(bank.metrics()["payments_client"]) <= {"acme", "*"}
    assert sorted(bank.prometheus().splitlines()) == before
    assert 'partition="<overflow>"' not in bank.prometheus()
    assert pay.state("globex") == "closed"


def test_c9_ids_that_only_look_reserved_are_tenants(bank: bb.Bank) -> None:  # C9
    pay = bank["payments_client"]
    for tenant in ["Global", "<overflow", "**", "café", "租户"]:
        assert pay.call(lambda: "ok", tenant=tenant) == "ok"
        assert pay.state(tenant) == "closed"
