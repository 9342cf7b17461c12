# Fleet alerting (deploy/prometheus) and the Grafana dashboard
# (deploy/grafana). Included by the root Makefile.
#
#   make prom-tools   promtool and the prometheus server, from Debian's
#                     `prometheus` package when either is missing (apt-get,
#                     as root)
#   make prom-test    promtool check rules + promtool test rules
#
# The dashboard's test is in the pytest suite (py/tests/test_dashboard.py):
# its metric names against a real exposition, and its queries parsed by
# promtool when promtool is there. So is the live test
# (py/tests/test_live_prometheus.py): the prometheus server scrapes a
# Python process serving a bank and fires the rules' stuck alert; the
# pytest suite therefore comes after prom-tools.

PROMTOOL ?= promtool
PROM_RULES := deploy/prometheus/breakerbank.rules.yml
PROM_TESTS := $(wildcard deploy/prometheus/tests/*.yml)

.PHONY: prom-tools prom-test

PROMETHEUS ?= prometheus

prom-tools:
	@if command -v $(PROMTOOL) >/dev/null 2>&1 && command -v $(PROMETHEUS) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "prom-tools: installing promtool and prometheus (Debian package prometheus)"; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	else \
	  echo "prom-tools: promtool or prometheus is missing and apt-get is not usable here (not root, or no apt):"; \
	  echo "prom-tools: install Debian's prometheus package to run make prom-test and the live test"; \
	fi

prom-test: prom-tools
	@if command -v $(PROMTOOL) >/dev/null 2>&1; then \
	  $(PROMTOOL) check rules $(PROM_RULES) && $(PROMTOOL) test rules $(PROM_TESTS); \
	else \
	  echo "prom-test: skipped (promtool not available: see prom-tools above)"; \
	fi

py-test: prom-tools
