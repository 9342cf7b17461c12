"""C14: the Prometheus exposition parsed back by the reference parser
(prometheus_client's OpenMetrics parser), escapes included."""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics import parser  # installed by mk/py.mk

import breakerbank as bb

from conftest import PROFILE


def test_c14_prometheus_round_trips_through_the_reference_parser() -> None:  # C14
    bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())
    pay = bank["payments_client"]
    # A quote and a backslash (a newline is a control character: no tenant
    # id holds one, C9).
    nasty = 'ac"me\\x line'
    for _ in range(3):
        with pytest.raises(RuntimeError):
            pay.call(_boom, tenant=nasty)
    families = {f.name: f for f in parser.text_string_to_metric_families(bank.prometheus())}
    state = {
        s.labels["state"]: s.value
        for s in families["breakerbank_state"].samples
        if s.labels["partition"] == nasty
    }
    assert state == {"closed": 0, "open": 1, "half_open": 0, "forced_open": 0}
    failures = families["breakerbank_failures"]
    assert failures.type == "counter"
    [sample] = [s for s in failures.samples if s.labels.get("partition") == nasty and s.name.endswith("_total")]
    assert sample.value == 3
    assert sample.labels["dependency"] == "payments_client"


def _boom() -> None:
    raise RuntimeError("down")


def _traffic() -> bb.Bank:
    bank = bb.Bank.from_yaml(PROFILE, clock=bb.ManualClock())
    pay = bank["payments_client"]
    for t in range(50):
        pay.call(lambda: "ok", tenant=f"tenant-{t}")
    for _ in range(3):
        with pytest.raises(RuntimeError):
            pay.call(_boom, tenant="acme")
    with pytest.raises(bb.DependencyUnavailable):
        pay.call(lambda: "ok", tenant="acme")
    return bank


def test_c14_the_snapshot_star_key_is_the_dependency_as_a_whole() -> None:  # C14
    bank = _traffic()
    star = bank.metrics()["payments_client"]["*"]
    assert star["calls_total"] == {"success": 50, "failure": 3, "cancelled": 0, "refused": 1}
    assert star["failures_total"] == 3 and star["rejected_open_total"] == 1
    assert star["partitions"] == {"closed": 50, "open": 1, "half_open": 0, "forced_open": 0}
    assert "call_duration_seconds" not in star  # no slow_call: calls are not timed


def test_c14_bank_collector_with_generate_latest() -> None:  # C14
    from prometheus_client import CollectorRegistry, generate_latest

    from breakerbank.prometheus import BankCollector

    bank = _traffic()
    registry = CollectorRegistry()
    registry.register(BankCollector(bank))
    text = generate_latest(registry).decode()
    assert 'breakerbank_dependency_calls_total{dependency="payments_client",outcome="success"} 50.0' in text
    assert 'breakerbank_dependency_calls_total{dependency="payments_client",outcome="refused"} 1.0' in text
    assert 'breakerbank_state{dependency="payments_client",partition="acme",state="open"} 1.0' in text
    assert "tenant-7" not in text  # closed: counted per dependency only
    # Each scrape reads the bank anew.
    bank["payments_client"].call(lambda: "ok", tenant="tenant-7")
    text = generate_latest(registry).decode()
    assert 'breakerbank_dependency_calls_total{dependency="payments_client",outcome="success"} 51.0' in text


def test_c14_bank_collector_served_by_start_http_server_over_loopback() -> None:  # C14
    import urllib.request

    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.openmetrics import parser as om

    from breakerbank.prometheus import CONTENT_TYPE, BankCollector

    bank = _traffic()
    registry = CollectorRegistry()
    registry.register(BankCollector(bank))
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        req = urllib.request.Request(url, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            body = r.read().decode()
        families = {f.name: f for f in om.text_string_to_metric_families(body)}
        calls = {
            s.labels["outcome"]: s.value
            for s in families["breakerbank_dependency_calls"].samples
            if s.labels["dependency"] == "payments_client"
        }
        assert calls == {"success": 50, "failure": 3, "cancelled": 0, "refused": 1}
        with urllib.request.urlopen(url, timeout=5) as r:  # the classic text format
            assert "breakerbank_dependency_failures_total" in r.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert CONTENT_TYPE == "application/openmetrics-text; version=1.0.0; charset=utf-8"


def test_c14_otel_instruments_read_by_the_sdk_in_memory_reader() -> None:  # C14
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from breakerbank.otel import instrument

    bank = _traffic()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrument(bank, meter_provider=provider)
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[tuple[dict[str, object], float]]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                points[m.name] = [(dict(p.attributes or {}), p.value) for p in m.data.data_points]
    pay = {"dependency": "payments_client"}
    calls = {a["outcome"]: v for a, v in points["breakerbank.dependency.calls"] if a["dependency"] == "payments_client"}
    assert calls == {"success": 50, "failure": 3, "cancelled": 0, "refused": 1}
    assert (pay, 3) in points["breakerbank.dependency.failures"]
    assert (pay, 1) in points["breakerbank.dependency.rejected_open"]
    assert ({**pay, "state": "open"}, 1) in points["breakerbank.dependency.partitions"]
    assert (pay, 0) in points["breakerbank.dependency.stuck"]
    provider.shutdown()
