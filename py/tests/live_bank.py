"""A service for test_live_prometheus.py: a bank on the system clock whose
exposition is served over HTTP on 127.0.0.1 (prometheus_client's server and
BankCollector), while it drives a single-tenant fault: tenant ``acme``'s
calls to ``payments_client`` always fail, every other tenant's succeed.

Run as ``python live_bank.py PROFILE``; prints the port, then runs until
killed.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

import breakerbank as bb
from breakerbank.prometheus import BankCollector

HEALTHY = [f"tenant-{i}" for i in range(20)]
FAULTY = "acme"


def drive(bank: bb.Bank) -> None:
    pay, mail = bank["payments_client"], bank["email_client"]

    def down() -> None:
        raise ConnectionError("payments_client: connection refused for acme")

    while True:
        for tenant in HEALTHY:
            pay.call(lambda: "ok", tenant=tenant)
        try:
            pay.call(down, tenant=FAULTY)
        except (ConnectionError, bb.DependencyUnavailable):
            pass
        mail.call(lambda: "sent")
        time.sleep(0.02)


def main() -> None:
    bank = bb.Bank.from_yaml(Path(sys.argv[1]).read_text(encoding="utf-8"))
    registry = CollectorRegistry()
    registry.register(BankCollector(bank))
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    print(server.server_port, flush=True)
    threading.Thread(target=drive, args=(bank,), daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
