"""C16: a process that forks keeps a working bank in the child.

gunicorn `--preload`, prefork Celery and `multiprocessing` with the fork
start method all build the bank in a parent and serve from its children:
there events, the sweep and stuck alerts must go on, with the state the
parent had at the fork. These tests run on the system clock (the sweep is a
thread only there) with short periods.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from typing import Any

import pytest
from conftest import dep_yaml, profile

import breakerbank as bb

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform"),
    # Python 3.12+ warns about forking a process with threads running: the
    # point of these tests is that the bank survives it.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

FORK_PROFILE = profile(
    dep_yaml(
        "svc_client",
        isolation="global",
        trip="{consecutive_failures: 1}",
        open_duration="300ms",
        half_open="{probe_budget: 1, success_threshold: 1}",
        recovery_bound="700ms",
    ),
    dep_yaml("tenants_client", trip="{consecutive_failures: 1}"),
)


def _parent_bank() -> tuple[bb.Bank, list[dict[str, Any]]]:
    bank = bb.Bank.from_yaml(FORK_PROFILE)
    seen: list[dict[str, Any]] = []
    bank.on_event(seen.append)
    svc = bank["svc_client"]
    with pytest.raises(RuntimeError):
        svc.call(_fail)
    bank["tenants_client"].force_open("acme")
    assert bank.flush_events(2)
    assert svc.state() == "open"
    seen.clear()
    return bank, seen


def _fail() -> None:
    raise RuntimeError("down")


def _wait_for(seen: list[dict[str, Any]], within: float, **match: str) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if any(all(e.get(k) == v for k, v in match.items()) for e in seen):
            return True
        time.sleep(0.005)
    return False


def _child_checks(bank: bb.Bank, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """What the child sees; the parent asserts on it."""
    out: dict[str, Any] = {}
    svc, tenants = bank["svc_client"], bank["tenants_client"]
    out["svc_state"] = svc.state()
    out["acme_state"] = tenants.state("acme")
    out["half_open_announced"] = _wait_for(
        seen, 3.0, kind="transition", dependency="svc_client", to="half_open"
    )
    out["stuck_announced"] = _wait_for(seen, 3.0, kind="stuck", dependency="svc_client")
    tenants.reset("acme")
    out["flushed"] = bank.flush_events(2)
    out["reset_heard"] = any(e["kind"] == "reset" and e["partition"] == "acme" for e in seen)
    late: list[dict[str, Any]] = []
    bank.on_event(late.append)
    tenants.force_open("globex")
    out["flushed_again"] = bank.flush_events(2)
    out["late_listener_heard"] = any(e["partition"] == "globex" for e in late)
    out["events_dropped"] = bank.events_dropped()
    return out


EXPECTED = {
    "svc_state": "open",
    "acme_state": "forced_open",
    "half_open_announced": True,
    "stuck_announced": True,
    "flushed": True,
    "reset_heard": True,
    "flushed_again": True,
    "late_listener_heard": True,
    "events_dropped": 0,
}


def test_c16_os_fork_child_keeps_events_sweep_and_stuck_alerts() -> None:
    bank, seen = _parent_bank()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            os.close(read)
            os.write(write, json.dumps(_child_checks(bank, seen)).encode())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(write, json.dumps({"error": repr(e)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, b"".join(chunks)
    assert json.loads(b"".join(chunks)) == EXPECTED
    # The parent's bank goes on as before.
    bank["tenants_client"].reset("acme")
    assert bank.flush_events(2)


# Set by the parent before it forks the pool's workers, which inherit it.
_INHERITED: tuple[bb.Bank, list[dict[str, Any]]] | None = None


def _worker(_: int) -> dict[str, Any]:
    assert _INHERITED is not None
    bank, seen = _INHERITED
    return _child_checks(bank, seen)


@pytest.mark.skipif(sys.platform == "win32", reason="fork start method")
def test_c16_multiprocessing_fork_workers_keep_a_working_bank() -> None:
    global _INHERITED
    _INHERITED = _parent_bank()
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2) as pool:
            results = pool.map(_worker, range(2))
    finally:
        _INHERITED = None
    assert results == [EXPECTED, EXPECTED]
