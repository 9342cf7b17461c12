/*
 * A payments service's outbound calls, guarded by breakerbank from C.
 *
 * Build (from the repository root, after `cargo build --release -p breakerbank-ffi`):
 *
 *   cc -std=c11 -Wall -Wextra -Iinclude examples/c/payments.c target/release/libbreakerbank_ffi.a -lpthread -ldl -lm -o payments
 *
 * Two dependencies, named after their client modules (C2):
 *   payments_client  tenant-scoped (C9), error fallback: answer "try later"
 *   fx_rates_client  global, stale fallback: serve the last good rate
 * One tenant's payment provider has an outage; the other tenants keep being
 * served (no false global trip), and the outage tenant gets a fast fallback
 * instead of waiting on a dead provider. Time is a manual clock moved 100 ms
 * per request, so the whole story runs in milliseconds.
 *
 * Usage: payments [--quick]   (--quick: no per-request log)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakerbank.h"

#define MS 1000000ull

static const char PROFILE[] =
    "dependencies:\n"
    "  payments_client:\n"
    "    isolation: tenant\n"
    "    trip: {consecutive_failures: 5}\n"
    "    open_duration: 3s\n"
    "    backoff: {multiplier: 2.0, max: 30s}\n"
    "    half_open: {probe_budget: 1, success_threshold: 2}\n"
    "    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}\n"
    "    recovery_bound: 1m\n"
    "  fx_rates_client:\n"
    "    isolation: global\n"
    "    trip: {failure_rate: 0.5, min_calls: 10, window: 10s}\n"
    "    open_duration: 5s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: stale, max_staleness: 10m}\n"
    "    recovery_bound: 2m\n";

static const char *const TENANTS[] = {"acme", "globex", "initech"};
#define N_TENANTS 3
#define REQUESTS 600

/* Abort with breakerbank's message: for calls that only fail on a bug. */
static void must(bb_status s, const char *what) {
  if (s != BB_OK) {
    char msg[512];
    size_t n = 0;
    if (bb_last_error(msg, sizeof msg, &n) != BB_OK) {
      strcpy(msg, "?");
    }
    fprintf(stderr, "%s failed (%u): %s\n", what, (unsigned)s, msg);
    exit(1);
  }
}

/* --- the pretend downstreams -------------------------------------------- */

/* acme's payment provider is down for requests 100..299. */
static bool provider_charge(const char *tenant, int request) {
  return !(strcmp(tenant, "acme") == 0 && request >= 100 && request < 300);
}

/* The FX service is down for requests 400..479. */
static bool fx_fetch(int request, double *rate) {
  if (request >= 400 && request < 480) {
    return false;
  }
  *rate = 1.08 + (request % 10) / 1000.0;
  return true;
}

/* --- events ------------------------------------------------------------- */

static const char *state_name(bb_breaker_state s) {
  switch (s) {
  case BB_STATE_CLOSED: return "closed";
  case BB_STATE_OPEN: return "open";
  case BB_STATE_HALF_OPEN: return "half_open";
  case BB_STATE_FORCED_OPEN: return "forced_open";
  default: return "?";
  }
}

/* Runs on breakerbank's event thread, never inside bb_admit/bb_record. */
static void on_event(void *user_data, const bb_event *e) {
  (void)user_data;
  if (e->kind == BB_EVENT_TRANSITION && e->has_from && e->has_to) {
    printf("  [event] %.*s/%.*s: %s -> %s at t=%.1fs\n", (int)e->dependency_len,
           e->dependency, (int)e->partition_len, e->partition, state_name(e->from),
           state_name(e->to), (double)e->at_ns / 1e9);
  } else if (e->kind == BB_EVENT_STUCK) {
    printf("  [event] %.*s/%.*s is stuck\n", (int)e->dependency_len, e->dependency,
           (int)e->partition_len, e->partition);
  }
  fflush(stdout);
}

/* --- the service -------------------------------------------------------- */

struct stats {
  int charged, declined_fast, provider_errors;
};

int main(int argc, char **argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  bb_bank *bank = NULL;
  must(bb_bank_from_yaml(PROFILE, strlen(PROFILE), true, &bank), "bb_bank_from_yaml");
  must(bb_set_listener(bank, on_event, NULL), "bb_set_listener");

  uint32_t payments = 0, fx = 0;
  must(bb_dependency_id(bank, "payments_client", strlen("payments_client"), &payments), "id");
  must(bb_dependency_id(bank, "fx_rates_client", strlen("fx_rates_client"), &fx), "id");
  char code[64];
  size_t code_len = 0;
  must(bb_fallback_code(bank, payments, code, sizeof code, &code_len), "bb_fallback_code");

  struct stats per_tenant[N_TENANTS];
  memset(per_tenant, 0, sizeof per_tenant);
  double last_good_rate = 0;
  int fx_stale = 0, fx_fresh = 0;

  for (int req = 0; req < REQUESTS; req++) {
    int t = req % N_TENANTS;
    const char *tenant = TENANTS[t];
    uint64_t now = 0;
    must(bb_clock_now_ns(bank, &now), "bb_clock_now_ns");
    uint64_t deadline = now + 2000 * MS;

    /* 1. the FX rate: fresh if admitted, else the last good one (stale) */
    bb_decision d;
    must(bb_admit(bank, fx, NULL, 0, deadline, &d), "bb_admit fx");
    double rate = 0;
    if (d.admitted) {
      bool ok = fx_fetch(req, &rate);
      must(bb_record(bank, d.permit, ok ? BB_OUTCOME_SUCCESS : BB_OUTCOME_FAILURE), "record");
      if (ok) {
        last_good_rate = rate;
        fx_fresh++;
      } else {
        rate = last_good_rate; /* the call failed: same fallback as rejected */
        fx_stale++;
      }
    } else if (d.fallback == BB_FALLBACK_STALE && last_good_rate > 0) {
      rate = last_good_rate;
      fx_stale++;
    }

    /* 2. the charge, per tenant */
    must(bb_admit(bank, payments, tenant, strlen(tenant), deadline, &d), "bb_admit payments");
    if (!d.admitted) {
      /* fail fast: nothing waits on the provider (C3) */
      per_tenant[t].declined_fast++;
      if (!quick) {
        printf("req %3d %-8s -> %.*s (retry in %llu ms)\n", req, tenant, (int)code_len, code,
               (unsigned long long)(d.retry_after_ns / MS));
      }
    } else {
      bool ok = provider_charge(tenant, req);
      must(bb_record(bank, d.permit, ok ? BB_OUTCOME_SUCCESS : BB_OUTCOME_FAILURE), "record");
      if (ok) {
        per_tenant[t].charged++;
      } else {
        per_tenant[t].provider_errors++;
      }
      if (!quick) {
        printf("req %3d %-8s -> %s%s at rate %.3f\n", req, tenant, ok ? "charged" : "error",
               d.probe ? " (probe)" : "", rate);
      }
    }
    must(bb_clock_advance(bank, 100 * MS), "bb_clock_advance");
  }

  printf("\n%-8s %8s %14s %16s\n", "tenant", "charged", "declined_fast", "provider_errors");
  for (int t = 0; t < N_TENANTS; t++) {
    printf("%-8s %8d %14d %16d\n", TENANTS[t], per_tenant[t].charged,
           per_tenant[t].declined_fast, per_tenant[t].provider_errors);
  }
  printf("fx rates: %d fresh, %d served stale\n", fx_fresh, fx_stale);

  bb_breaker_state st;
  must(bb_state(bank, payments, "acme", 4, &st), "bb_state");
  printf("acme's payments breaker is %s again\n", state_name(st));

  /* what an operator's scrape would see about acme */
  size_t need = 0;
  bb_status s = bb_metrics_prometheus(bank, NULL, 0, &need);
  if (s != BB_OK && s != BB_ERR_BUFFER_TOO_SMALL) {
    must(s, "bb_metrics_prometheus");
  }
  char *text = malloc(need + 1);
  size_t len = 0;
  must(bb_metrics_prometheus(bank, text, need + 1, &len), "bb_metrics_prometheus");
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (strstr(line, "partition=\"acme\"") &&
        (strstr(line, "opened_total") || strstr(line, "rejected_open_total"))) {
      printf("  %s\n", line);
    }
  }
  free(text);
  must(bb_bank_free(bank), "bb_bank_free");

  /* the story's invariants: only acme was ever declined, and it recovered */
  bool ok = per_tenant[1].declined_fast == 0 && per_tenant[2].declined_fast == 0 &&
            per_tenant[0].declined_fast > 0 && st == BB_STATE_CLOSED;
  printf("%s\n", ok ? "ok: only the failing tenant was isolated" : "UNEXPECTED outcome");
  return ok ? 0 : 1;
}
