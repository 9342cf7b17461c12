/*
 * breakerbank's C ABI: what breaker users rely on beyond admission —
 * failure classification (C17), inspection (C18) and operator transitions
 * (C19). Time is a manual clock.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "bbtest.h"

#define SEC 1000000000ull

/* Closed partitions get series too (metrics.partitions: all): the tests
   read their counters by name. */
static const char PROFILE[] =
    "metrics: {partitions: all}\n"
    "dependencies:\n"
    "  payments_client:\n"
    "    isolation: tenant\n"
    "    trip: {consecutive_failures: 3}\n"
    "    open_duration: 30s\n"
    "    backoff: {multiplier: 2.0, max: 5m}\n"
    "    half_open: {probe_budget: 2, success_threshold: 2}\n"
    "    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}\n"
    "    recovery_bound: 5m\n"
    "  email_client:\n"
    "    isolation: global\n"
    "    trip: {consecutive_failures: 2}\n"
    "    open_duration: 10s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: degraded}\n"
    "    recovery_bound: 1m\n";

static bb_bank *bank;
static uint32_t PAY, EMAIL;

static void fresh_bank(void) {
  bb_bank_free(bank);
  bank = bbt_bank(PROFILE, true);
  PAY = bbt_dep(bank, "payments_client");
  EMAIL = bbt_dep(bank, "email_client");
}

static void advance(uint64_t ns) { CHECK_OK(bb_clock_advance(bank, ns)); }

static uint64_t now_ns(void) {
  uint64_t t = 0;
  CHECK_OK(bb_clock_now_ns(bank, &t));
  return t;
}

static bb_inspection inspect(uint32_t dep, const char *tenant) {
  bb_inspection i;
  memset(&i, 0xAB, sizeof i);
  CHECK_OK(bb_inspect(bank, dep, tenant, tenant ? strlen(tenant) : 0, &i));
  return i;
}

/* ---- C17: classification ------------------------------------------------ */

/* C has no wrapped call: the caller classifies by the outcome it records. */
static void c17_the_recorded_outcome_is_the_callers_classification(void) {
  fresh_bank();
  for (int i = 0; i < 5; i++) {
    /* "not found": an answer, recorded as a success */
    CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_SUCCESS));
    /* the caller gave up: neither */
    CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_CANCELLED));
  }
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) <= 0);
  CHECK(bbt_metric(bank, "cancelled_total", "email_client", "global", NULL) == 5);
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(inspect(EMAIL, NULL).consecutive_failures == 1);
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
}

/* ---- C18: inspection ---------------------------------------------------- */

static void c18_inspect_reads_counters_and_episode(void) {
  fresh_bank();
  advance(5 * SEC);
  bb_inspection i = inspect(PAY, "acme");
  CHECK(i.state == BB_STATE_CLOSED && i.consecutive_failures == 0);
  CHECK(i.since_ns == 0); /* never transitioned: the start of the bank's clock */
  CHECK(!i.has_retry_after && i.retry_after_ns == 0);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(inspect(PAY, "acme").consecutive_failures == 2);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  uint64_t tripped = now_ns();
  advance(10 * SEC);
  i = inspect(PAY, "acme");
  CHECK(i.state == BB_STATE_OPEN && i.consecutive_failures == 0 && i.retrips == 0);
  CHECK(i.since_ns == tripped);
  CHECK(i.has_retry_after && i.retry_after_ns == 20 * SEC);
  advance(20 * SEC);
  bb_decision p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_SUCCESS));
  bb_decision q = bbt_admit(bank, PAY, "acme");
  i = inspect(PAY, "acme");
  CHECK(i.state == BB_STATE_HALF_OPEN && i.half_open_successes == 1);
  CHECK(i.probes_in_flight == 1 && !i.has_retry_after && i.since_ns == tripped);
  CHECK_OK(bb_record(bank, q.permit, BB_OUTCOME_FAILURE)); /* re-trip */
  i = inspect(PAY, "acme");
  CHECK(i.state == BB_STATE_OPEN && i.retrips == 1 && i.since_ns == tripped);
  CHECK(i.retry_after_ns == 60 * SEC); /* backoff */
  /* another tenant, never seen: fresh, and not created by asking */
  i = inspect(PAY, "globex");
  CHECK(i.state == BB_STATE_CLOSED && i.since_ns == 0 && i.probes_in_flight == 0);
  CHECK(bbt_metric(bank, "state", "payments_client", "globex", "closed") == -1);
  /* a global dependency ignores the tenant */
  CHECK(inspect(EMAIL, NULL).state == BB_STATE_CLOSED);
  CHECK(inspect(EMAIL, "anyone").state == BB_STATE_CLOSED);
}

/* A failure-rate breaker's window as inspect reads it: the calls its rate
   is taken over and the failures among them, back to 0 once they have
   aged out; a consecutive-failures breaker keeps no window. */
static void c18_inspect_reads_the_failure_rate_window(void) {
  bb_bank *rated = bbt_bank("dependencies:\n"
                            "  search_client:\n"
                            "    isolation: tenant\n"
                            "    trip: {failure_rate: 0.5, min_calls: 10, window: 10s}\n"
                            "    open_duration: 30s\n"
                            "    half_open: {probe_budget: 1, success_threshold: 1}\n"
                            "    fallback: {kind: degraded}\n"
                            "    recovery_bound: 5m\n",
                            true);
  uint32_t search = bbt_dep(rated, "search_client");
  for (int k = 0; k < 3; k++) CHECK(bbt_call(rated, search, "acme", BB_OUTCOME_SUCCESS));
  for (int k = 0; k < 2; k++) CHECK(bbt_call(rated, search, "acme", BB_OUTCOME_FAILURE));
  bb_inspection i;
  CHECK_OK(bb_inspect(rated, search, "acme", 4, &i));
  CHECK(i.state == BB_STATE_CLOSED && i.window_calls == 5 && i.window_failures == 2);
  CHECK(i.consecutive_failures == 2);
  CHECK_OK(bb_clock_advance(rated, 11 * SEC));
  CHECK_OK(bb_inspect(rated, search, "acme", 4, &i));
  CHECK(i.window_calls == 0 && i.window_failures == 0);
  bb_bank_free(rated);
  fresh_bank();
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  i = inspect(PAY, "acme");
  CHECK(i.consecutive_failures == 1 && i.window_calls == 0 && i.window_failures == 0);
}

static void c18_inspect_bad_input_writes_nothing(void) {
  fresh_bank();
  bb_inspection i;
  memset(&i, 0x5A, sizeof i);
  bb_inspection before = i;
  CHECK_STATUS(bb_inspect(bank, PAY, NULL, 0, &i), BB_ERR_TENANT_REQUIRED);
  CHECK_STATUS(bb_inspect(bank, PAY, "", 0, &i), BB_ERR_TENANT_REQUIRED);
  CHECK_STATUS(bb_inspect(bank, 9, "a", 1, &i), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK_STATUS(bb_inspect(bank, PAY, "a", 1, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_inspect(NULL, PAY, "a", 1, &i), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_inspect(bank, PAY, "\x80", 1, &i), BB_ERR_INVALID_TENANT);
  char long_tenant[300];
  memset(long_tenant, 'x', sizeof long_tenant);
  CHECK_STATUS(bb_inspect(bank, PAY, long_tenant, sizeof long_tenant, &i),
               BB_ERR_INVALID_TENANT);
  CHECK(memcmp(&i, &before, sizeof i) == 0);
}

/* ---- C19: operator transitions ------------------------------------------ */

/* Events arrive on breakerbank's thread: counted atomically, waited for. */
struct seen_events {
  atomic_int trips_from_closed; /* BB_EVENT_TRIP, closed -> open */
  atomic_int half_opens;        /* BB_EVENT_HALF_OPEN, open -> half-open */
};

static void count_events(void *user_data, const bb_event *e) {
  struct seen_events *seen = user_data;
  if (e->kind == BB_EVENT_TRIP && e->has_from && e->from == BB_STATE_CLOSED && e->has_to &&
      e->to == BB_STATE_OPEN) {
    atomic_fetch_add(&seen->trips_from_closed, 1);
  } else if (e->kind == BB_EVENT_HALF_OPEN && e->has_from && e->from == BB_STATE_OPEN &&
             e->has_to && e->to == BB_STATE_HALF_OPEN) {
    atomic_fetch_add(&seen->half_opens, 1);
  }
}

static int wait_for(atomic_int *field, int want) {
  struct timespec ms5 = {0, 5000000L};
  for (int i = 0; i < 400 && atomic_load(field) < want; i++) {
    nanosleep(&ms5, NULL);
  }
  return atomic_load(field);
}

static void c19_trip_opens_and_ends_by_itself(void) {
  fresh_bank();
  static struct seen_events seen;
  atomic_init(&seen.trips_from_closed, 0);
  atomic_init(&seen.half_opens, 0);
  CHECK_OK(bb_set_listener(bank, count_events, &seen));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK_OK(bb_trip(bank, PAY, "acme", 4));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_CLOSED);
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(!d.admitted && d.reason == BB_REASON_OPEN && d.retry_after_ns == 30 * SEC);
  CHECK(bbt_metric(bank, "opened_total", "payments_client", "acme", NULL) == 1);
  advance(30 * SEC);
  bb_decision p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe); /* the probe cycle follows by itself */
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_SUCCESS));
  p = bbt_admit(bank, PAY, "acme");
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  /* a global dependency, tenant ignored */
  CHECK_OK(bb_trip(bank, EMAIL, "x", 1));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
  CHECK(wait_for(&seen.trips_from_closed, 2) == 2);
  CHECK_OK(bb_set_listener(bank, NULL, NULL));
}

static void c19_half_open_starts_a_probe_cycle_now(void) {
  fresh_bank();
  static struct seen_events seen;
  atomic_init(&seen.trips_from_closed, 0);
  atomic_init(&seen.half_opens, 0);
  CHECK_OK(bb_set_listener(bank, count_events, &seen));
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
  CHECK_OK(bb_half_open(bank, EMAIL, NULL, 0));
  bb_inspection i = inspect(EMAIL, NULL);
  CHECK(i.state == BB_STATE_HALF_OPEN && !i.has_retry_after);
  bb_decision p = bbt_admit(bank, EMAIL, NULL);
  CHECK(p.admitted && p.probe);
  CHECK(bbt_admit(bank, EMAIL, NULL).reason == BB_REASON_PROBE_BUDGET);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "half_opened_total", "email_client", "global", NULL) == 1);
  CHECK(wait_for(&seen.half_opens, 1) == 1);
  CHECK_OK(bb_set_listener(bank, NULL, NULL));
}

static void c19_empty_tenant_means_every_partition_and_forced_stays_forced(void) {
  fresh_bank();
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_SUCCESS));
  CHECK(bbt_call(bank, PAY, "globex", BB_OUTCOME_FAILURE));
  CHECK_OK(bb_force_open(bank, PAY, "globex", 6));
  CHECK_OK(bb_trip(bank, PAY, NULL, 0));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_FORCED_OPEN); /* until bb_reset */
  CHECK(bbt_state(bank, PAY, "first-seen-later") == BB_STATE_CLOSED);
  CHECK_OK(bb_half_open(bank, PAY, "", 0));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_HALF_OPEN);
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_FORCED_OPEN);
  /* bad input changes nothing */
  char long_tenant[300];
  memset(long_tenant, 'x', sizeof long_tenant);
  CHECK_STATUS(bb_trip(bank, PAY, long_tenant, sizeof long_tenant), BB_ERR_INVALID_TENANT);
  CHECK_STATUS(bb_half_open(bank, PAY, long_tenant, sizeof long_tenant), BB_ERR_INVALID_TENANT);
  CHECK_STATUS(bb_trip(bank, 9, NULL, 0), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK_STATUS(bb_half_open(NULL, PAY, NULL, 0), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_trip(bank, PAY, NULL, 3), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_half_open(bank, PAY, "\xff", 1), BB_ERR_INVALID_TENANT);
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_CLOSED);
}

int main(void) {
  RUN(c17_the_recorded_outcome_is_the_callers_classification);
  RUN(c18_inspect_reads_counters_and_episode);
  RUN(c18_inspect_reads_the_failure_rate_window);
  RUN(c18_inspect_bad_input_writes_nothing);
  RUN(c19_trip_opens_and_ends_by_itself);
  RUN(c19_half_open_starts_a_probe_cycle_now);
  RUN(c19_empty_tenant_means_every_partition_and_forced_stays_forced);
  bb_bank_free(bank);
  return bbt_summary();
}
