"""The pytest plugin (breakerbank.pytest_plugin), run with pytester: its
fixtures work in a test suite of their own, and its assertion fails when a
partition other than the faulty one changed state (C9)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import PROFILE

pytest_plugins = ["pytester"]

HEADER = f'''\
from pathlib import Path

from breakerbank.pytest_plugin import assert_no_false_global_trips

PROFILE = """{PROFILE}"""


def fail(dep, tenant, times):
    for _ in range(times):
        dep.admit(tenant=tenant).failure()
'''


def suite(pytester: pytest.Pytester, body: str) -> None:
    pytester.makefile(".yaml", profile=PROFILE)
    pytester.makepyfile(test_suite=HEADER + textwrap.dedent(body))


def test_the_plugin_is_loaded_by_its_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures")
    result.stdout.fnmatch_lines(
        [
            "plugins: *breakerbank-*",
            "*fixtures defined from breakerbank.pytest_plugin*",
            "breakerbank_clock -- *",
            "breakerbank_bank -- *",
            "breakerbank_faults -- *",
        ]
    )


def test_banks_on_a_manual_clock_from_a_profile_string_or_file(pytester: pytest.Pytester) -> None:
    suite(
        pytester,
        """
        def test_from_text(breakerbank_bank, breakerbank_clock):
            bank = breakerbank_bank(PROFILE)
            dep = bank["payments_client"]
            fail(dep, "acme", 3)
            assert dep.state(tenant="acme") == "open"
            breakerbank_clock.advance(30)
            assert dep.state(tenant="acme") == "half_open"
            assert bank.now() == 30.0


        def test_from_a_file(breakerbank_bank):
            for path in ("profile.yaml", Path("profile.yaml")):
                assert breakerbank_bank(path).dependencies == ["payments_client", "email_client", "rates_client"]


        def test_each_test_has_its_own_clock(breakerbank_bank, breakerbank_clock):
            assert breakerbank_clock.now() == 0.0
            assert breakerbank_bank(PROFILE).now() == 0.0
        """,
    )
    pytester.runpytest().assert_outcomes(passed=3)


def test_faults_on_virtual_time_and_no_false_global_trips(pytester: pytest.Pytester) -> None:  # C9
    suite(
        pytester,
        """
        def test_one_tenant_outage_stays_with_that_tenant(breakerbank_bank, breakerbank_faults, breakerbank_clock):
            bank = breakerbank_bank(PROFILE)
            breakerbank_clock.advance(5)  # the run counts from the clock's time
            report = breakerbank_faults(
                bank, duration="10m", tenants=10, rate=100,
                faults=[{"dependency": "payments_client", "tenant": "tenant-03", "start": "1m", "duration": "2m"}],
            )
            faulty = report.partitions["payments_client"]["tenant-03"]
            assert faulty.faulted and faulty.changed
            states = [state for _, state in faulty.timeline]
            assert states[:2] == ["closed", "open"] and states[-1] == "closed"
            assert 60 <= faulty.timeline[1][0] < 61  # at the fault's start, on the run's time
            assert len(report.partitions["payments_client"]) == 10
            assert breakerbank_clock.now() == 605.0
            assert_no_false_global_trips(report)
            assert_no_false_global_trips(bank, faulty={"payments_client": ["tenant-03"]})


        def test_a_fault_on_a_global_dependency(breakerbank_bank, breakerbank_faults):
            bank = breakerbank_bank(PROFILE)
            report = breakerbank_faults(
                bank, duration="2m", rate=50,
                traffic={"payments_client": {"rate": 0}, "rates_client": {"rate": 0}},
                faults=[{"dependency": "email_client", "start": "10s", "duration": "20s"}],
            )
            assert report.partitions["email_client"]["global"].changed
            assert_no_false_global_trips(report, dependency="email_client")
        """,
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_the_assertion_fails_when_another_partition_changed_state(pytester: pytest.Pytester) -> None:  # C9
    suite(
        pytester,
        """
        def test_a_bank_with_another_tenant_tripped(breakerbank_bank):
            bank = breakerbank_bank(PROFILE)
            dep = bank["payments_client"]
            fail(dep, "acme", 3)      # the faulty tenant
            fail(dep, "globex", 3)    # another
            fail(dep, "initech", 1)   # counted a failure, no change of state
            assert_no_false_global_trips(bank, faulty={"payments_client": ["acme"]})


        def test_a_run_in_which_another_tenant_recovers(breakerbank_bank, breakerbank_faults):
            bank = breakerbank_bank(PROFILE)
            fail(bank["payments_client"], "tenant-05", 3)  # open when the run starts
            report = breakerbank_faults(
                bank, duration="3m", tenants=10, rate=100,
                faults=[{"dependency": "payments_client", "tenant": "tenant-03", "start": "1m", "duration": "1m"}],
            )
            assert_no_false_global_trips(report)


        def test_the_faulty_tenant_alone_passes(breakerbank_bank):
            bank = breakerbank_bank(PROFILE)
            fail(bank["payments_client"], "acme", 3)
            assert_no_false_global_trips(bank, faulty={"payments_client": ["acme"]})
        """,
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: 1 false global trip (partitions not faulted that changed state):",
            "*payments_client / globex: open (opened_total 1)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: 1 false global trip (partitions not faulted that changed state):",
            "*payments_client / tenant-05: open -> half_open at 30.*s -> closed at 30.*s",
        ]
    )
    assert "payments_client / initech" not in result.stdout.str()
