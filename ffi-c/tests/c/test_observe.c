/*
 * C22 at the ABI: a dependency in observe mode admits every call, counts
 * each firing of its trip policy in would_trip_total (Prometheus text, per
 * partition and per dependency) and announces BB_EVENT_WOULD_TRIP, never
 * opening; a reload may switch the mode, and the switch starts closed.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <time.h>

#include "bbtest.h"

/* `name` (global or tenant) with `trip` and `mode`; every partition listed
 * in the exposition, so a closed one's would_trip_total can be read. */
static void profile(char *out, size_t cap, const char *isolation, const char *trip,
                    const char *mode) {
  snprintf(out, cap,
           "metrics: {partitions: all}\n"
           "dependencies:\n"
           "  svc_client:\n"
           "    isolation: %s\n"
           "    trip: %s\n"
           "    open_duration: 30s\n"
           "    half_open: {probe_budget: 1, success_threshold: 1}\n"
           "    fallback: {kind: error, code: SVC_DOWN}\n"
           "    recovery_bound: 5m\n"
           "    mode: %s\n",
           isolation, trip, mode);
}

/*
 * The value of `breakerbank_dependency_<name>{dependency="<dep>"}`, or -1
 * when there is no such line.
 */
static double dependency_metric(const bb_bank *bank, const char *name, const char *dep) {
  char *text = bbt_prometheus(bank);
  char want[256];
  double value = -1;
  snprintf(want, sizeof want, "breakerbank_dependency_%s{dependency=\"%s\"} ", name, dep);
  char *at = strstr(text, want);
  if (at != NULL) {
    value = strtod(at + strlen(want), NULL);
  }
  free(text);
  return value;
}

static atomic_int would_trips_seen;
static atomic_int resets_seen;
static char would_trip_partition[64];

static void on_event(void *user_data, const bb_event *e) {
  (void)user_data;
  if (e->kind == BB_EVENT_WOULD_TRIP) {
    size_t n = e->partition_len < sizeof would_trip_partition - 1
                   ? e->partition_len
                   : sizeof would_trip_partition - 1;
    memcpy(would_trip_partition, e->partition, n);
    would_trip_partition[n] = '\0';
    CHECK(!e->has_from && !e->has_to);
    atomic_fetch_add(&would_trips_seen, 1);
  } else if (e->kind == BB_EVENT_RESET) {
    atomic_fetch_add(&resets_seen, 1);
  }
}

/* Every event emitted so far has reached the listener: a reset of an
 * unseen tenant is announced after them, in order. */
static void drain_events(bb_bank *bank, uint32_t dep, const char *sentinel) {
  int before = atomic_load(&resets_seen);
  CHECK_OK(bb_reset(bank, dep, sentinel, strlen(sentinel)));
  for (int i = 0; i < 2000 && atomic_load(&resets_seen) == before; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(atomic_load(&resets_seen) == before + 1);
}

static void fail_n(const bb_bank *bank, uint32_t dep, const char *tenant, int n) {
  for (int i = 0; i < n; i++) {
    CHECK(bbt_call(bank, dep, tenant, BB_OUTCOME_FAILURE));
  }
}

static void c22_fifteen_failures_at_five_admit_every_call_and_count_three_would_trips(void) {
  char yaml[2048];
  profile(yaml, sizeof yaml, "global", "{consecutive_failures: 5}", "observe");
  bb_bank *bank = bbt_bank(yaml, true);
  atomic_store(&would_trips_seen, 0);
  CHECK_OK(bb_set_listener(bank, on_event, NULL));
  uint32_t svc = bbt_dep(bank, "svc_client");
  for (int i = 0; i < 15; i++) {
    bb_decision d = bbt_admit(bank, svc, NULL);
    CHECK(d.admitted);
    CHECK(!d.probe);
    CHECK(d.reason == BB_REASON_NONE);
    CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_FAILURE));
    CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  }
  CHECK(bbt_metric(bank, "would_trip_total", "svc_client", "global", NULL) == 3);
  CHECK(dependency_metric(bank, "would_trip_total", "svc_client") == 3);
  CHECK(bbt_metric(bank, "opened_total", "svc_client", "global", NULL) == 0);
  CHECK(bbt_metric(bank, "failures_total", "svc_client", "global", NULL) == 15);
  bb_inspection seen;
  CHECK_OK(bb_inspect(bank, svc, NULL, 0, &seen));
  CHECK(seen.consecutive_failures == 0);
  drain_events(bank, svc, "");
  CHECK(atomic_load(&would_trips_seen) == 3);
  CHECK(strcmp(would_trip_partition, "global") == 0);
  bb_bank_free(bank);
}

static void c22_a_failure_rate_policy_counts_would_trips(void) {
  char yaml[2048];
  profile(yaml, sizeof yaml, "global", "{failure_rate: 0.5, min_calls: 4, window: 10s}",
          "observe");
  bb_bank *bank = bbt_bank(yaml, true);
  uint32_t svc = bbt_dep(bank, "svc_client");
  for (int i = 0; i < 12; i++) {
    CHECK(bbt_call(bank, svc, NULL, BB_OUTCOME_FAILURE));
    CHECK_OK(bb_clock_advance(bank, 10 * 1000 * 1000));
  }
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "would_trip_total", "svc_client", "global", NULL) == 3);
  CHECK(dependency_metric(bank, "would_trip_total", "svc_client") == 3);
  bb_bank_free(bank);
}

static void c22_a_would_trip_in_one_tenant_does_not_touch_another(void) {
  char yaml[2048];
  profile(yaml, sizeof yaml, "tenant", "{consecutive_failures: 5}", "observe");
  bb_bank *bank = bbt_bank(yaml, true);
  atomic_store(&would_trips_seen, 0);
  CHECK_OK(bb_set_listener(bank, on_event, NULL));
  uint32_t svc = bbt_dep(bank, "svc_client");
  fail_n(bank, svc, "globex", 3);
  fail_n(bank, svc, "acme", 15);
  CHECK(bbt_metric(bank, "would_trip_total", "svc_client", "acme", NULL) == 3);
  CHECK(bbt_metric(bank, "would_trip_total", "svc_client", "globex", NULL) == 0);
  CHECK(dependency_metric(bank, "would_trip_total", "svc_client") == 3);
  bb_inspection seen;
  CHECK_OK(bb_inspect(bank, svc, "globex", 6, &seen));
  CHECK(seen.state == BB_STATE_CLOSED);
  CHECK(seen.consecutive_failures == 3);
  drain_events(bank, svc, "sentinel");
  CHECK(atomic_load(&would_trips_seen) == 3);
  CHECK(strcmp(would_trip_partition, "acme") == 0);
  bb_bank_free(bank);
}

static void c22_a_reload_switches_the_mode_both_ways(void) {
  char observe[2048], enforce[2048];
  profile(observe, sizeof observe, "global", "{consecutive_failures: 5}", "observe");
  profile(enforce, sizeof enforce, "global", "{consecutive_failures: 5}", "enforce");
  bb_bank *bank = bbt_bank(observe, true);
  uint32_t svc = bbt_dep(bank, "svc_client");
  fail_n(bank, svc, NULL, 9);
  /* To enforce: closed, the four failures counted in observe mode gone. */
  CHECK_OK(bb_bank_reload(bank, enforce, strlen(enforce)));
  bb_inspection seen;
  CHECK_OK(bb_inspect(bank, svc, NULL, 0, &seen));
  CHECK(seen.state == BB_STATE_CLOSED);
  CHECK(seen.consecutive_failures == 0);
  fail_n(bank, svc, NULL, 4);
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  fail_n(bank, svc, NULL, 1);
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_OPEN);
  /* Back to observe: the open breaker closes and admits every call. */
  CHECK_OK(bb_bank_reload(bank, observe, strlen(observe)));
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  fail_n(bank, svc, NULL, 5);
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "would_trip_total", "svc_client", "global", NULL) == 2);
  bb_bank_free(bank);
}

static void c22_a_bad_mode_is_a_config_error_naming_the_field(void) {
  char yaml[2048];
  profile(yaml, sizeof yaml, "global", "{consecutive_failures: 5}", "watch");
  bb_bank *bank = NULL;
  CHECK_STATUS(bb_bank_from_yaml(yaml, strlen(yaml), true, &bank), BB_ERR_CONFIG);
  CHECK(bank == NULL);
  CHECK(strstr(bbt_last_error(), "`mode`") != NULL);
  CHECK(strstr(bbt_last_error(), "`observe`") != NULL);
}

int main(void) {
  RUN(c22_fifteen_failures_at_five_admit_every_call_and_count_three_would_trips);
  RUN(c22_a_failure_rate_policy_counts_would_trips);
  RUN(c22_a_would_trip_in_one_tenant_does_not_touch_another);
  RUN(c22_a_reload_switches_the_mode_both_ways);
  RUN(c22_a_bad_mode_is_a_config_error_naming_the_field);
  return bbt_summary();
}
