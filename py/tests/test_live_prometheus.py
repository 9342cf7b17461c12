"""C14, C15: a real Prometheus scrapes a real process.

Debian's ``prometheus`` server, on 127.0.0.1 with 1 s scrape and evaluation
intervals and deploy/prometheus's rules, scrapes a Python process serving
its bank's exposition (``live_bank.py``) while that process drives a
single-tenant fault on the system clock. The test asks the server's HTTP
API until the stuck alert fires for the faulty tenant, and checks that it
fires for no other. The profile's durations are short (``recovery_bound:
2s``) and the alert's ``for`` is shortened to 1 s in the test's copy of the
rules, so the whole takes seconds.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "breakerbank.rules.yml"
HERE = Path(__file__).resolve().parent

PROFILE = """\
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 2}
    open_duration: 300ms
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 2s
    max_tenants: 100
  email_client:
    isolation: global
    trip: {consecutive_failures: 2}
    open_duration: 300ms
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 2s
"""

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="Debian's prometheus server is not installed and could not be "
    "(make prom-tools installs it with apt-get as root)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def api(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]


def test_c14_c15_a_real_prometheus_fires_the_stuck_alert_for_the_faulty_tenant_only(
    tmp_path: Path,
) -> None:  # C14 C15
    (tmp_path / "profile.yaml").write_text(PROFILE)
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    [stuck] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "BreakerbankBreakerStuck"]
    stuck["for"] = "1s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))

    service = subprocess.Popen(
        [sys.executable, str(HERE / "live_bank.py"), str(tmp_path / "profile.yaml")],
        stdout=subprocess.PIPE,
        text=True,
    )
    server = None
    log = (tmp_path / "prometheus.log").open("w")
    try:
        assert service.stdout is not None
        target = int(service.stdout.readline())
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "rules.yml")],
            "scrape_configs": [
                {"job_name": "checkout", "static_configs": [{"targets": [f"127.0.0.1:{target}"]}]}
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        server = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 45
        firing: list[dict[str, Any]] = []
        alerts: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                alerts = [
                    a for a in api(port, "/api/v1/alerts")["alerts"]
                    if a["labels"]["alertname"] == "BreakerbankBreakerStuck"
                ]
            except (urllib.error.URLError, ConnectionError):
                alerts = []  # still starting
            firing = [a for a in alerts if a["state"] == "firing"]
            if firing:
                break
            time.sleep(0.5)
        assert firing, f"no stuck alert fired; alerts: {alerts}\n" + (tmp_path / "prometheus.log").read_text()
        # The faulty tenant, and no other, pending or firing.
        assert {(a["labels"]["dependency"], a["labels"]["partition"]) for a in alerts} == {
            ("payments_client", "acme")
        }, alerts
        assert firing[0]["labels"]["job"] == "checkout"
        # What the server scraped: the per-dependency series, and the
        # faulty tenant as the only partition listed by name.
        data = api(port, "/api/v1/query?query=breakerbank_dependency_calls_total")
        outcomes = {r["metric"]["outcome"] for r in data["result"]}
        assert outcomes == {"success", "failure", "cancelled", "refused"}
        data = api(port, "/api/v1/query?query=count%20by%20(partition)%20(breakerbank_state)")
        assert {r["metric"]["partition"] for r in data["result"]} == {"acme"}
    finally:
        for p in (server, service):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if service.stdout is not None:
            service.stdout.close()
        log.close()
