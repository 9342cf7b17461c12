"""The bank's per-dependency metrics as OpenTelemetry instruments (C14).

``pip install 'breakerbank[otel]'`` (``opentelemetry-api``), then::

    from breakerbank.otel import instrument
    instrument(bank)                      # the global MeterProvider
    instrument(bank, meter_provider=mp)   # or one of yours

Observable instruments, read when the SDK collects, one bank snapshot a
collection: a counter for every counter of the dependency
(``breakerbank.dependency.failures``, ``.rejected_open``, ...), evicted
partitions included, so none goes down; ``breakerbank.dependency.calls``
by ``outcome`` (success, failure, cancelled, refused); gauges for
``breakerbank.dependency.partitions`` by ``state``, ``.stuck`` (how many
partitions are stuck) and ``.open_episode`` (seconds). Every point has
the attribute ``dependency``. Seconds have the unit ``s``; an exporter to
Prometheus names them as the bank's own exposition does
(``breakerbank_dependency_open_seconds_total``).

The call-duration histogram is not published here: the OpenTelemetry API
has no observable histogram. Read it from ``bank.metrics()[dep]["*"]``
or scrape the Prometheus exposition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._native import Bank

__all__ = ["instrument"]

# A snapshot serves every callback of one collection: the SDK calls them
# one after another, well within this.
_FRESH_SECONDS = 0.25


class _Snapshots:
    """The bank's per-dependency totals, read at most once per collection."""

    def __init__(self, bank: Bank) -> None:
        self._bank = bank
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._totals: dict[str, dict[str, Any]] = {}

    def totals(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            now = time.monotonic()
            if now - self._at > _FRESH_SECONDS:
                self._totals = {dep: parts["*"] for dep, parts in self._bank.metrics().items()}
                self._at = now
            return self._totals


def _one(name: str) -> Callable[[dict[str, Any]], list[tuple[float, dict[str, str]]]]:
    """Reads the sum named ``name`` of a dependency's totals."""

    def read(totals: dict[str, Any]) -> list[tuple[float, dict[str, str]]]:
        return [(totals[name], {})]

    return read


def instrument(bank: Bank, meter_provider: Any = None) -> list[Any]:
    """Registers the bank's per-dependency instruments on a meter of
    ``meter_provider`` (default: the global one); returns them."""
    try:
        from opentelemetry import metrics
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "breakerbank.otel needs opentelemetry-api: pip install 'breakerbank[otel]'"
        ) from e
    from breakerbank import __version__

    meter = metrics.get_meter("breakerbank", __version__, meter_provider=meter_provider)
    snaps = _Snapshots(bank)
    first = next(iter(bank.metrics().values()), {}).get("*", {})
    names = [k for k, v in first.items() if not isinstance(v, dict)]
    made: list[Any] = []

    def points(read: Callable[[dict[str, Any]], Iterable[tuple[float, dict[str, str]]]]) -> Any:
        def callback(_options: Any) -> Iterable[Any]:
            for dep, t in snaps.totals().items():
                for value, attrs in read(t):
                    yield metrics.Observation(value, {"dependency": dep, **attrs})

        return callback

    for name in names:
        if name == "stuck" or name == "open_episode_seconds":
            continue
        stem = name.removesuffix("_total")
        unit = "1"
        if stem.endswith("_seconds"):
            stem, unit = stem.removesuffix("_seconds"), "s"
        made.append(
            meter.create_observable_counter(
                f"breakerbank.dependency.{stem}",
                callbacks=[points(_one(name))],
                unit=unit,
                description=f"{name} of the dependency's partitions summed, evicted ones included",
            )
        )
    made.append(
        meter.create_observable_counter(
            "breakerbank.dependency.calls",
            callbacks=[points(lambda t: [(n, {"outcome": o}) for o, n in t["calls_total"].items()])],
            unit="{call}",
            description="Calls by outcome: success, failure, cancelled, refused",
        )
    )
    made.append(
        meter.create_observable_gauge(
            "breakerbank.dependency.partitions",
            callbacks=[points(lambda t: [(n, {"state": s}) for s, n in t["partitions"].items()])],
            unit="{partition}",
            description="The dependency's partitions in each state",
        )
    )
    made.append(
        meter.create_observable_gauge(
            "breakerbank.dependency.stuck",
            callbacks=[points(lambda t: [(t["stuck"], {})])],
            unit="{partition}",
            description="Partitions open past their recovery bound",
        )
    )
    made.append(
        meter.create_observable_gauge(
            "breakerbank.dependency.open_episode",
            callbacks=[points(lambda t: [(t["open_episode_seconds"], {})])],
            unit="s",
            description="Seconds open in the current episodes, summed",
        )
    )
    return made
