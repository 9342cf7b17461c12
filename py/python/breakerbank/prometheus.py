"""The bank's metrics in a ``prometheus_client`` registry (C14).

For a service that already serves ``/metrics`` with ``prometheus_client``::

    from prometheus_client import REGISTRY
    from breakerbank.prometheus import BankCollector

    REGISTRY.register(BankCollector(bank))

Each scrape reads the bank once, through the same exposition as
``bank.prometheus()``: the per-dependency series
(``breakerbank_dependency_<name>{dependency}``, evicted partitions
included), ``breakerbank_dependency_partitions{state}``,
``breakerbank_dependency_calls_total{outcome}``, the call-duration
histogram of dependencies with ``slow_call``, and per-partition series
only for partitions that are not closed (unless the profile says
``metrics: {partitions: all}``).

A service without ``prometheus_client`` can serve ``bank.prometheus()``
itself, with the content type :data:`CONTENT_TYPE` (OpenMetrics text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._native import Bank

#: The content type of ``bank.prometheus()``'s text: OpenMetrics 1.0.0.
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

__all__ = ["CONTENT_TYPE", "BankCollector"]


class BankCollector:
    """A ``prometheus_client`` collector of one bank's metrics.

    ``REGISTRY.register(BankCollector(bank))``; works with
    ``generate_latest``, ``start_http_server`` and ``make_wsgi_app``, in
    either exposition format the client negotiates.
    """

    def __init__(self, bank: Bank) -> None:
        try:
            from prometheus_client.openmetrics import parser
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(
                "breakerbank.prometheus.BankCollector needs prometheus_client: "
                "pip install 'breakerbank[prometheus]'"
            ) from e
        self._bank = bank
        self._parse: Callable[[str], Iterator[Any]] = parser.text_string_to_metric_families

    def collect(self) -> Iterator[Any]:
        """The bank's metric families, read now (one snapshot a scrape)."""
        yield from self._parse(self._bank.prometheus())

    def describe(self) -> list[Any]:
        """Nothing up front: the families depend on the bank's state, so
        the registry does not read the bank when the collector is
        registered."""
        return []
