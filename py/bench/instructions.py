"""Instructions per call of one statement, for figures a loaded machine cannot move.

Run it under callgrind twice, with 0 and N iterations; the difference over N
is the cost of one iteration (loop included: `pass` alone is ~154); a
statement of several lines indents its later lines by two spaces
("try: odep.call(f)\n  except E: pass"). A fixed hash seed keeps dict
lookups, and so the counts, the same from run to run (about ±40 apart
without it):

    for n in 0 20000; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python py/bench/instructions.py "dep.call(f)" $n 2>&1 | grep Collected
    done

Names available to the statement: f, dep, tdep (tenant-scoped), odep (open:
tripped, for an hour), gdep (`degraded`, open: `gdep.call(f, fallback=f)`), g (a
coroutine function: "try: dep.acall(g).send(None)\n  except StopIteration:
pass" runs one async call without an event loop), breaker,
obreaker (open), breakers (100 pybreakers by tenant), bb, pybreaker, E,
raise_plain, raise_attrs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pybreaker  # noqa: E402
from bench import PROFILE  # noqa: E402

import breakerbank as bb  # noqa: E402

bank = bb.Bank.from_yaml(PROFILE)
dep = bank["payments_client"]
tdep = bank["tenant_client"]
odep = bb.Bank.from_yaml(PROFILE)["payments_client"]
odep.trip()
gdep = bb.Bank.from_yaml(PROFILE)["degraded_client"]
gdep.trip()
breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
obreaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
obreaker.open()
breakers = {f"tenant-{i}": pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600) for i in range(100)}


def f() -> int:
    return 1


async def g() -> int:
    return 1


class E(Exception):
    """A pure-Python exception carrying what DependencyUnavailable carries."""

    dependency: str
    partition: str
    code: str | None
    retry_after: float | None


def raise_plain() -> None:
    raise ValueError("x")


def raise_attrs() -> None:
    e = E("dependency `payments_client` is unavailable for partition `global` (PAYMENT_UNAVAILABLE)")
    e.dependency, e.partition, e.code, e.retry_after = "payments_client", "global", "X", None
    raise e


if __name__ == "__main__":
    stmt, n = sys.argv[1], int(sys.argv[2])
    code = compile(f"def run():\n for _ in range({n}):\n  {stmt}\n", "<bench>", "exec")
    env = dict(globals())
    exec(code, env)
    env["run"]()
