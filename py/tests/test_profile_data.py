"""The profile section: a profile given as a dict gets the checks and the
messages a YAML text gets (``Bank.from_dict``), and ``Bank.from_yaml``
given a dict says to use ``from_dict``."""

from __future__ import annotations

import collections
import copy
import re
from typing import Any

import pytest
import yaml

import breakerbank as bb

PROFILE: dict[str, Any] = {
    "memory_limit": "64MiB",
    "dependencies": {
        "payments_client": {
            "isolation": "tenant",
            "trip": {"consecutive_failures": 3, "slow_call": "2s"},
            "open_duration": "30s",
            "backoff": {"multiplier": 2.0, "max": "5m"},
            "half_open": {"probe_budget": 2, "success_threshold": 2},
            "fallback": {"kind": "error", "code": "PAYMENT_UNAVAILABLE"},
            "recovery_bound": "5m",
            "probe_timeout": "1m",
            "max_tenants": 1000,
        },
        "rates_client": {
            "isolation": "global",
            "trip": {"failure_rate": 0.5, "min_calls": 20, "window": "10s"},
            "open_duration": "15s",
            "half_open": {"probe_budget": 1, "success_threshold": 1},
            "fallback": {"kind": "stale", "max_staleness": "10m"},
            "recovery_bound": "2m",
        },
    },
}


def problems_of(build: Any) -> list[str]:
    with pytest.raises(bb.ConfigError) as err:
        build()
    assert err.value.problems
    # Only text has lines and columns.
    return [re.sub(r" at line \d+ column \d+", "", p) for p in err.value.problems]


def edited(**changes: Any) -> dict[str, Any]:
    """PROFILE with `path.to.field=value` changes (None deletes)."""
    out = copy.deepcopy(PROFILE)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = out
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return out


def test_profile_from_dict_builds_the_bank_from_yaml_builds() -> None:
    clock = bb.ManualClock()
    bank = bb.Bank.from_dict(PROFILE, clock=clock)
    assert bank.dependencies == ["payments_client", "rates_client"]
    assert bank.clock is not None
    payments = bank["payments_client"]
    for _ in range(3):
        payments.admit(tenant="acme").failure()
    assert payments.state(tenant="acme") == "open"
    assert payments.inspect(tenant="acme")["retry_after"] == 30.0


@pytest.mark.parametrize(
    "changes",
    [
        {"dependencies__payments_client__open_duration": "0s"},
        {"dependencies__payments_client__open_duration": None},
        {"dependencies__payments_client__half_open__probe_budget": 500},
        {"dependencies__payments_client__half_open__probe_budget": "two"},
        {"dependencies__payments_client__recovry_bound": "5m"},
        {"dependencies__rates_client__fallback__max_staleness": 10},
        {"dependencies__rates_client__max_tenants": 10},
        {"dependencies__rates_client__trip__failure_rate": 1.5},
        {"dependencies__GET /pay": copy.deepcopy(PROFILE["dependencies"]["rates_client"])},
        {"memory_limit": "1KiB"},
        {"memory_limit": [1]},
        {"dependencies": {}},
        {"dependencies": None},
        {"dependencies": ["payments_client"]},
        {"depedencies": {}},
    ],
    ids=lambda c: ",".join(c),
)
def test_profile_from_dict_gives_the_problems_the_yaml_text_gives(changes: dict[str, Any]) -> None:
    data = edited(**changes)
    text = yaml.safe_dump(data, sort_keys=False)
    assert problems_of(lambda: bb.Bank.from_dict(data)) == problems_of(lambda: bb.Bank.from_yaml(text))


def test_profile_from_dict_lists_every_problem() -> None:
    data = edited(
        dependencies__payments_client__open_duration="0s",
        dependencies__rates_client__half_open={"probe_budget": 0, "success_threshold": 1},
    )
    problems = problems_of(lambda: bb.Bank.from_dict(data))
    assert len(problems) == 2, problems
    assert "payments_client" in problems[0] and "open_duration" in problems[0]
    assert "rates_client" in problems[1] and "half_open.probe_budget" in problems[1]


def test_profile_from_dict_takes_any_mapping_and_tuples() -> None:
    data = collections.OrderedDict(edited())
    bank = bb.Bank.from_dict(data)
    assert "rates_client" in bank


def test_profile_from_yaml_given_a_dict_says_to_use_from_dict() -> None:
    with pytest.raises(TypeError, match=r"Bank\.from_dict"):
        bb.Bank.from_yaml(PROFILE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        bb.Bank.from_yaml(42)  # type: ignore[arg-type]


def test_profile_from_dict_given_text_says_to_use_from_yaml() -> None:
    with pytest.raises(TypeError, match=r"Bank\.from_yaml"):
        bb.Bank.from_dict(yaml.safe_dump(PROFILE))  # type: ignore[arg-type]


def test_profile_from_dict_refuses_values_a_profile_cannot_hold_naming_where() -> None:
    import datetime

    data = edited(dependencies__payments_client__open_duration=datetime.timedelta(seconds=30))
    with pytest.raises(TypeError, match=r"`dependencies\.payments_client\.open_duration` is a timedelta"):
        bb.Bank.from_dict(data)


def test_profile_from_dict_refuses_a_mapping_that_contains_itself() -> None:
    data: dict[str, Any] = edited()
    data["dependencies"]["payments_client"]["trip"]["again"] = data
    with pytest.raises(ValueError, match="levels deep"):
        bb.Bank.from_dict(data)
