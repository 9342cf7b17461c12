"""deploy/grafana/breakerbank.json and deploy/prometheus's rules query only
API.md's metric names, and each one is in a real exposition of a bank that
has seen traffic (C14)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import dep_yaml, fail, profile, trip
from prometheus_client.openmetrics import parser

import breakerbank as bb

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "breakerbank.json"
RULES = ROOT / "deploy" / "prometheus" / "breakerbank.rules.yml"
RULE_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))

# API.md, "Metric names (all surfaces)", each as `breakerbank_<name>`.
API_METRICS = {
    f"breakerbank_{name}"
    for name in (
        "state open_seconds_total open_episode_seconds opened_total half_opened_total closed_total "
        "rejected_open_total probe_rejects_total forced_open_rejects_total deadline_expired_total "
        "failures_total cancelled_total late_records_total fallback_stale_total fallback_degraded_total "
        "fallback_error_total fallback_failures_total partition_overflow_total would_trip_total stuck"
    ).split()
}
# Per dependency (C14): every metric but `state` as
# `breakerbank_dependency_<name>`, partitions by state, calls by outcome, and
# the call-duration histogram (of a dependency with slow_call).
DEPENDENCY_METRICS = {
    m.replace("breakerbank_", "breakerbank_dependency_", 1) for m in API_METRICS if m != "breakerbank_state"
} | {
    "breakerbank_dependency_partitions",
    "breakerbank_dependency_calls_total",
    "breakerbank_dependency_call_duration_seconds_bucket",
    "breakerbank_dependency_call_duration_seconds_sum",
    "breakerbank_dependency_call_duration_seconds_count",
}
API_METRICS |= DEPENDENCY_METRICS
# Bank-wide, beside API.md's per-partition metrics: events the queue dropped.
BANK_METRICS = {"breakerbank_events_dropped_total"}
# The exposition's labels, the two a scrape adds, and a histogram's.
LABELS = {"dependency", "partition", "state", "outcome", "le", "job", "instance"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
             "and", "or", "unless", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana variables aside)."""
    e = _STRING.sub('""', expr)
    e = re.sub(r"\$\{?\w+\}?", "", e)  # $job, $__rate_interval
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges
    e = _GROUPING.sub(" ", e)
    e = re.sub(r"[A-Za-z_:][\w:]*\s*\(", "(", e)  # functions and aggregations
    return {w for w in re.findall(r"\b[A-Za-z_:][\w:]*", e) if w.lower() not in _KEYWORDS}


def label_names(expr: str) -> set[str]:
    """The label names an expression matches on or groups by."""
    e = _STRING.sub('""', expr)
    names = set()
    for matchers in re.findall(r"\{([^}]*)\}", e):
        names |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    for grouping in _GROUPING.findall(e):
        names |= {n.strip() for n in grouping.split(",") if n.strip()}
    return names


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and query variable."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["query"]["query"])
            assert m, f"variable {var['name']}: expected label_values(selector, label)"
            yield f"variable {var['name']}", m.group(1)


def exposed_names() -> set[str]:
    """Sample names of a real exposition, after traffic that touches every counter's path."""
    clock = bb.ManualClock()
    bank = bb.Bank.from_yaml(
        profile(
            dep_yaml("payments_client", trip="{consecutive_failures: 2}", recovery_bound="1m", max_tenants="2"),
            dep_yaml("rates_client", isolation="global", trip="{consecutive_failures: 2, slow_call: 5s}",
                     recovery_bound="1m",
                     fallback="{kind: stale, max_staleness: 10m}"),
        ),
        clock=clock,
    )
    pay, rates = bank["payments_client"], bank["rates_client"]
    trip(pay, "acme", failures=2)
    trip(pay, "globex", failures=2)
    with pytest.raises(bb.DependencyUnavailable):
        pay.call(lambda: None, tenant="acme")
    fail(pay, 2, "initech")  # a full table of open tenants: <overflow>
    assert pay.breaker_of("initech") == "<overflow>"
    assert rates.call(lambda: 1.5) == 1.5
    fail(rates, 2)
    assert rates.call(lambda: 0.0) == 1.5  # stale
    clock.advance(120)  # stuck, and half-open
    text = bank.prometheus()
    return {s.name for f in parser.text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture(scope="module")
def exposed() -> set[str]:
    return exposed_names()


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def test_metric_names_are_extracted_from_promql() -> None:
    expr = (
        'count without (instance, state) (breakerbank_state{job=~"$job", state=~"open|half_open"} == 1)'
        " / ignoring (partition) group_left sum(rate(breakerbank_failures_total[$__rate_interval] offset 5m))"
        ' or up{job="x"}'
    )
    assert metric_names(expr) == {"breakerbank_state", "breakerbank_failures_total", "up"}
    assert label_names(expr) == {"instance", "state", "job", "partition"}


def test_c14_every_dashboard_metric_is_in_api_md_and_in_a_real_exposition(
    dashboard: dict[str, Any], exposed: set[str]
) -> None:
    used: set[str] = set()
    for where, expr in queries(dashboard):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= API_METRICS, f"{where}: not API.md metric names: {sorted(names - API_METRICS)}"
        assert names <= exposed, f"{where}: not in bank.prometheus(): {sorted(names - exposed)}"
        assert label_names(expr) <= LABELS, f"{where}: unknown labels {sorted(label_names(expr) - LABELS)}"
        used |= names
    # The dashboard shows every per-dependency metric (C14), and per
    # partition only which partitions are not closed.
    assert DEPENDENCY_METRICS - {
        "breakerbank_dependency_call_duration_seconds_sum",
        "breakerbank_dependency_call_duration_seconds_count",
    } <= used, sorted(DEPENDENCY_METRICS - used)


def test_c14_the_dashboard_has_a_tenants_open_now_panel(dashboard: dict[str, Any]) -> None:  # C14
    [panel] = [p for p in dashboard["panels"] if p["title"] == "Tenants open now"]
    [target] = panel["targets"]
    assert metric_names(target["expr"]) == {"breakerbank_dependency_partitions"}
    assert 'state=~"open|half_open"' in target["expr"]


def test_c14_the_rules_and_their_tests_use_api_md_metrics_of_a_real_exposition(exposed: set[str]) -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    assert {r["alert"] for r in rules if "alert" in r} == {
        "BreakerbankBreakerStuck", "BreakerbankDependencyOpenFleetWide", "BreakerbankPartitionOverflow",
        "BreakerbankEventsDropped",
    }
    for rule in rules:
        where = rule.get("record") or rule["alert"]
        names = metric_names(rule["expr"]) - recorded
        known = API_METRICS | BANK_METRICS
        assert names <= known, f"{where}: not API.md metric names: {sorted(names - known)}"
        assert names <= exposed, f"{where}: not in bank.prometheus(): {sorted(names - exposed)}"
        assert label_names(rule["expr"]) <= LABELS, f"{where}: unknown labels"
    # The promtool tests feed series of the exposition's names, not others.
    assert RULE_TESTS
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for series in test["input_series"]:
                name = series["series"].split("{")[0]
                assert name in exposed, f"{path.name}: {test['name']}: {name} is not exposed"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (make prom-test installs it)")
def test_every_dashboard_query_parses_as_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": expr.replace("$__rate_interval", "5m").replace("$", "")}
                    for i, (_, expr) in enumerate(queries(dashboard))
                ],
            }
        ]
    }
    path = tmp_path / "dashboard.rules.json"
    path.write_text(json.dumps(rules))  # JSON is YAML
    out = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
