"""C9's input limits through the Python API: tenant ids are 1 to 256 bytes
of UTF-8, and a profile whose tables cannot be built is a ConfigError."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from conftest import dep_yaml, partitions, profile

import breakerbank as bb

TOO_LONG = ["x" * 257, "é" * 128 + "x", "x" * (1 << 20)]


@pytest.mark.parametrize("tenant", TOO_LONG, ids=["257", "257-utf8", "1MiB"])
def test_c9_tenant_id_longer_than_256_bytes_raises_invalid_tenant(
    bank: bb.Bank, tenant: str
) -> None:  # C9
    pay = bank["payments_client"]
    pay.call(lambda: 1, tenant="acme")
    before = sorted(bank.prometheus().splitlines())
    size = str(len(tenant.encode()))
    calls: list[Callable[[], object]] = [
        lambda: pay.admit(tenant=tenant),
        lambda: pay.state(tenant=tenant),
        lambda: pay.call(lambda: 1, tenant=tenant),
        lambda: asyncio.run(pay.acall(asyncio.sleep, 0, tenant=tenant)),
        lambda: pay.reset(tenant=tenant),
        lambda: pay.force_open(tenant=tenant),
    ]
    for call in calls:
        with pytest.raises(bb.InvalidTenant) as err:
            call()
        assert isinstance(err.value, bb.BreakerError)
        assert isinstance(err.value, ValueError)
        assert "256" in str(err.value) and size in str(err.value)
        assert err.value.dependency == "payments_client"
    # Counted against nothing: no partition, no overflow, and the forced
    # open above isolated no one.
    assert list(partitions(bank, "payments_client")) == ["acme"]
    assert sorted(bank.prometheus().splitlines()) == before
    assert pay.state(tenant="globex") == "closed"


def test_c9_tenant_id_of_256_bytes_is_accepted(bank: bb.Bank) -> None:  # C9
    pay = bank["payments_client"]
    for tenant in ["x" * 256, "é" * 128]:
        assert pay.call(lambda: "ok", tenant=tenant) == "ok"
        assert pay.state(tenant=tenant) == "closed"
        assert tenant in bank.metrics()["payments_client"]


def test_c9_missing_tenant_is_still_tenant_required(bank: bb.Bank) -> None:  # C9
    for tenant in [None, ""]:
        with pytest.raises(bb.TenantRequired):
            bank["payments_client"].admit(tenant=tenant)


def test_c9_max_tenants_over_one_million_is_a_config_error() -> None:  # C9
    text = profile(dep_yaml("payments_client", max_tenants="1000001"))
    with pytest.raises(bb.ConfigError) as err:
        bb.Bank.from_yaml(text)
    assert "payments_client" in str(err.value) and "max_tenants" in str(err.value)


def test_c9_partitions_over_memory_limit_are_a_config_error() -> None:  # C9
    deps = [dep_yaml(f"client_{i}", max_tenants="1000000") for i in range(2)]
    text = "memory_limit: 100MiB\n" + profile(*deps)
    with pytest.raises(bb.ConfigError) as err:
        bb.Bank.from_yaml(text)
    for needle in ["client_0", "client_1", "memory_limit"]:
        assert needle in str(err.value)
