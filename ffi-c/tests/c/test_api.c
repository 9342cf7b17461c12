/*
 * breakerbank's C ABI, single-threaded: every clause of CONTRACT.md that is
 * reachable through C (tests named cN_...), and bad input of every kind.
 * Time is a manual clock moved with bb_clock_advance.
 */
#include <stdint.h>

#include "bbtest.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define MIN (60ull * SEC)

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
    "    trip: {consecutive_failures: 2, slow_call: 1s}\n"
    "    open_duration: 10s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: degraded}\n"
    "    recovery_bound: 1m\n"
    "  search_client:\n"
    "    isolation: global\n"
    "    trip: {failure_rate: 0.5, min_calls: 4, window: 10s}\n"
    "    open_duration: 5s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: stale, max_staleness: 10m}\n"
    "    recovery_bound: 1m\n";

static const char SMALL_PROFILE[] =
    "metrics: {partitions: all}\n"
    "dependencies:\n"
    "  ledger_client:\n"
    "    isolation: tenant\n"
    "    trip: {consecutive_failures: 1}\n"
    "    open_duration: 30s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: error, code: LEDGER_DOWN}\n"
    "    recovery_bound: 5m\n"
    "    max_tenants: 2\n";

static bb_bank *bank;
static uint32_t PAY, EMAIL, SEARCH;

static void fresh_bank(void) {
  bb_bank_free(bank);
  bank = bbt_bank(PROFILE, true);
  PAY = bbt_dep(bank, "payments_client");
  EMAIL = bbt_dep(bank, "email_client");
  SEARCH = bbt_dep(bank, "search_client");
}

static void advance(uint64_t ns) { CHECK_OK(bb_clock_advance(bank, ns)); }

static uint64_t now_ns(void) {
  uint64_t t = 0;
  CHECK_OK(bb_clock_now_ns(bank, &t));
  return t;
}

static void trip_payments(const char *tenant) {
  for (int i = 0; i < 3; i++) {
    CHECK(bbt_call(bank, PAY, tenant, BB_OUTCOME_FAILURE));
  }
  CHECK(bbt_state(bank, PAY, tenant) == BB_STATE_OPEN);
}

/* ---- C1 / C9: identity and tenant isolation ---------------------------- */

static void c1_dependencies_never_share_a_breaker(void) {
  fresh_bank();
  CHECK(PAY != EMAIL && EMAIL != SEARCH && PAY != SEARCH);
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_CLOSED);
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(d.admitted);
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
}

static void c9_one_tenants_failures_never_touch_another(void) {
  fresh_bank();
  trip_payments("acme");
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_CLOSED);
  bb_decision d = bbt_admit(bank, PAY, "globex");
  CHECK(d.admitted && !d.probe);
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  /* two failures on globex do not trip it: counters are per tenant */
  CHECK(bbt_call(bank, PAY, "globex", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "globex", BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "acme", NULL) == 3);
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "globex", NULL) == 2);
}

static void c9_global_dependency_ignores_tenant(void) {
  fresh_bank();
  CHECK(bbt_call(bank, EMAIL, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, EMAIL, "globex", BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
  CHECK(bbt_state(bank, EMAIL, "anyone") == BB_STATE_OPEN);
}

static void c9_full_table_routes_to_overflow_partition(void) {
  bb_bank *small = bbt_bank(SMALL_PROFILE, true);
  uint32_t dep = bbt_dep(small, "ledger_client");
  /* two open partitions fill max_tenants: 2 and cannot be evicted */
  CHECK(bbt_call(small, dep, "t1", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(small, dep, "t2", BB_OUTCOME_FAILURE));
  bb_decision d = bbt_admit(small, dep, "t3");
  CHECK(d.admitted);
  CHECK_OK(bb_record(small, d.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_metric(small, "partition_overflow_total", "ledger_client", "<overflow>", NULL) >= 1);
  /* t1 and t2 keep their outage */
  CHECK(bbt_state(small, dep, "t1") == BB_STATE_OPEN);
  CHECK(bbt_state(small, dep, "t2") == BB_STATE_OPEN);
  bb_bank_free(small);
}

static void c9_idle_partitions_are_evicted_memory_stays_bounded(void) {
  bb_bank *small = bbt_bank(SMALL_PROFILE, true);
  uint32_t dep = bbt_dep(small, "ledger_client");
  char tenant[32];
  for (int i = 0; i < 500; i++) {
    snprintf(tenant, sizeof tenant, "tenant-%d", i);
    CHECK(bbt_call(small, dep, tenant, BB_OUTCOME_SUCCESS));
  }
  char *text = bbt_prometheus(small);
  int partitions = 0;
  for (char *p = text; (p = strstr(p, "breakerbank_opened_total{")) != NULL; p++) {
    partitions++;
  }
  free(text);
  CHECK(partitions <= 3); /* max_tenants, plus at most the overflow partition */
  CHECK(bbt_metric(small, "partition_overflow_total", "ledger_client", "<overflow>", NULL) <= 0);
  bb_bank_free(small);
}

/* ---- C2 / C6: profile validation --------------------------------------- */

static void expect_config_error(const char *yaml, const char *must_mention) {
  bb_bank *b = (bb_bank *)&b; /* poison: must stay untouched on failure */
  bb_bank *const poison = b;
  CHECK_STATUS(bb_bank_from_yaml(yaml, strlen(yaml), true, &b), BB_ERR_CONFIG);
  CHECK(b == poison);
  if (b != poison) {
    bb_bank_free(b); /* accepted by mistake: do not leak it */
  }
  const char *msg = bbt_last_error();
  if (strstr(msg, must_mention) == NULL) {
    fprintf(stderr, "  message %s does not mention %s\n", msg, must_mention);
    CHECK(strstr(msg, must_mention) != NULL);
  }
}

#define DEP_BODY(open)                                                                    \
  "    isolation: global\n"                                                               \
  "    trip: {consecutive_failures: 2}\n" open                                            \
  "    half_open: {probe_budget: 1, success_threshold: 1}\n"                              \
  "    fallback: {kind: degraded}\n"                                                      \
  "    recovery_bound: 1m\n"

static void c2_route_like_names_are_rejected(void) {
  expect_config_error("dependencies:\n  \"GET /payments\":\n" DEP_BODY("    open_duration: 5s\n"),
                      "GET /payments");
  expect_config_error("dependencies:\n  \"api/charge\":\n" DEP_BODY("    open_duration: 5s\n"),
                      "api/charge");
  expect_config_error("dependencies:\n  \"pay ments\":\n" DEP_BODY("    open_duration: 5s\n"),
                      "pay ments");
}

static void c6_open_duration_is_required(void) {
  expect_config_error("dependencies:\n  email_client:\n" DEP_BODY(""), "open_duration");
  expect_config_error("dependencies:\n  email_client:\n" DEP_BODY("    open_duration: 0s\n"),
                      "email_client");
}

static void c6_config_errors_name_dependency_and_field(void) {
  expect_config_error("dependencies:\n  email_client:\n" DEP_BODY("    open_duration: 5s\n")
                      "    surprise: 1\n",
                      "surprise");
  expect_config_error("dependencies: [unterminated\n", "");
}

/* ---- C5: trip policies -------------------------------------------------- */

static void c5_consecutive_failures_trip_and_success_resets_count(void) {
  fresh_bank();
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_SUCCESS));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
}

static void c5_failure_rate_trips_at_rate_with_min_calls(void) {
  fresh_bank();
  for (int i = 0; i < 3; i++) {
    CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE));
  }
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_CLOSED); /* 3 calls < min_calls */
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_OPEN); /* 4/4 with min_calls 4 */

  fresh_bank();
  for (int i = 0; i < 3; i++) {
    CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_SUCCESS));
  }
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE)); /* 1/4 */
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE)); /* 2/5 */
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE)); /* 3/6 = 0.5 >= 0.5 */
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_OPEN);

  /* a success can complete min_calls: S, F, F, S is 2/4 = 0.5 */
  fresh_bank();
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_SUCCESS));
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_OPEN);

  /* calls older than the window no longer count */
  fresh_bank();
  for (int i = 0; i < 3; i++) {
    CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE));
  }
  advance(11 * SEC);
  CHECK(bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE)); /* 1 call in the window */
  CHECK(bbt_state(bank, SEARCH, NULL) == BB_STATE_CLOSED);
}

static void c5_slow_call_counts_as_failure(void) {
  fresh_bank();
  for (int i = 0; i < 2; i++) {
    bb_decision d = bbt_admit(bank, EMAIL, NULL);
    CHECK(d.admitted);
    advance(1 * SEC); /* took slow_call: a failure even though it returned */
    CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  }
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
}

/* ---- C3 / C4: fail fast into the declared fallback ---------------------- */

static void c3_open_rejects_into_declared_fallback(void) {
  fresh_bank();
  trip_payments("acme");
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(!d.admitted && !d.probe);
  CHECK(d.reason == BB_REASON_OPEN);
  CHECK(d.fallback == BB_FALLBACK_ERROR);
  CHECK(d.permit.opaque[0] == 0 && d.permit.opaque[1] == 0);
  char code[64];
  size_t n = 0;
  CHECK_OK(bb_fallback_code(bank, PAY, code, sizeof code, &n));
  CHECK(n == strlen("PAYMENT_UNAVAILABLE") && strcmp(code, "PAYMENT_UNAVAILABLE") == 0);
  CHECK_OK(bb_fallback_code(bank, EMAIL, code, sizeof code, &n));
  CHECK(n == 0);

  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  d = bbt_admit(bank, EMAIL, NULL);
  CHECK(!d.admitted && d.reason == BB_REASON_OPEN && d.fallback == BB_FALLBACK_DEGRADED);

  for (int i = 0; i < 4; i++) {
    bbt_call(bank, SEARCH, NULL, BB_OUTCOME_FAILURE);
  }
  d = bbt_admit(bank, SEARCH, NULL);
  CHECK(!d.admitted && d.reason == BB_REASON_OPEN && d.fallback == BB_FALLBACK_STALE);
  CHECK(bbt_metric(bank, "rejected_open_total", "payments_client", "acme", NULL) == 1);
}

static void c4_retry_after_is_time_until_next_probe(void) {
  fresh_bank();
  trip_payments("acme");
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(d.reason == BB_REASON_OPEN && d.retry_after_ns == 30 * SEC);
  advance(10 * SEC);
  d = bbt_admit(bank, PAY, "acme");
  CHECK(d.reason == BB_REASON_OPEN && d.retry_after_ns == 20 * SEC);
  CHECK_OK(bb_force_open(bank, PAY, "globex", 6));
  d = bbt_admit(bank, PAY, "globex");
  CHECK(d.reason == BB_REASON_FORCED_OPEN && d.retry_after_ns == 0);
}

/* ---- C6 / C7 / C8: open period, probes, closing ------------------------- */

static void c6_open_period_then_probe_with_backoff(void) {
  fresh_bank();
  trip_payments("acme");
  advance(30 * SEC - 1);
  CHECK(bbt_admit(bank, PAY, "acme").reason == BB_REASON_OPEN);
  advance(1);
  bb_decision p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_HALF_OPEN);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_FAILURE)); /* re-trip: 60s now */
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(d.reason == BB_REASON_OPEN && d.retry_after_ns == 60 * SEC);
  advance(59 * SEC);
  CHECK(bbt_admit(bank, PAY, "acme").reason == BB_REASON_OPEN);
  advance(1 * SEC);
  p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_CANCELLED));
}

static void c7_probe_budget_caps_probes_in_flight(void) {
  fresh_bank();
  trip_payments("acme");
  advance(30 * SEC);
  bb_decision p1 = bbt_admit(bank, PAY, "acme");
  bb_decision p2 = bbt_admit(bank, PAY, "acme");
  bb_decision p3 = bbt_admit(bank, PAY, "acme");
  CHECK(p1.admitted && p1.probe && p2.admitted && p2.probe);
  CHECK(!p3.admitted && p3.reason == BB_REASON_PROBE_BUDGET && p3.retry_after_ns == 0);
  CHECK(p3.fallback == BB_FALLBACK_ERROR);
  CHECK(bbt_metric(bank, "probe_rejects_total", "payments_client", "acme", NULL) == 1);
  CHECK_OK(bb_record(bank, p1.permit, BB_OUTCOME_CANCELLED)); /* returns its slot */
  bb_decision p4 = bbt_admit(bank, PAY, "acme");
  CHECK(p4.admitted && p4.probe);
  CHECK_OK(bb_record(bank, p2.permit, BB_OUTCOME_CANCELLED));
  CHECK_OK(bb_record(bank, p4.permit, BB_OUTCOME_CANCELLED));
}

static void c7_c13_earlier_episode_probe_holds_its_slot(void) {
  fresh_bank();
  trip_payments("acme");
  advance(30 * SEC);
  bb_decision old = bbt_admit(bank, PAY, "acme");
  bb_decision failing = bbt_admit(bank, PAY, "acme");
  CHECK(old.probe && failing.probe);
  CHECK_OK(bb_record(bank, failing.permit, BB_OUTCOME_FAILURE)); /* reopen: 60s */
  advance(60 * SEC);
  bb_decision p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe);
  CHECK(bbt_admit(bank, PAY, "acme").reason == BB_REASON_PROBE_BUDGET); /* old holds one */
  CHECK_OK(bb_record(bank, old.permit, BB_OUTCOME_SUCCESS)); /* late: slot back only */
  CHECK(bbt_metric(bank, "late_records_total", "payments_client", "acme", NULL) == 1);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_HALF_OPEN);
  bb_decision q = bbt_admit(bank, PAY, "acme");
  CHECK(q.admitted && q.probe);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_CANCELLED));
  CHECK_OK(bb_record(bank, q.permit, BB_OUTCOME_CANCELLED));
}

/* C7's probe_timeout (the dependency's recovery_bound, 5m, by default): a C
 * caller that loses its permits cannot wedge the breaker half-open. */
static void c7_lost_probe_permits_give_their_slots_back_after_probe_timeout(void) {
  fresh_bank();
  trip_payments("acme");
  advance(30 * SEC);
  bb_decision lost1 = bbt_admit(bank, PAY, "acme");
  bb_decision lost2 = bbt_admit(bank, PAY, "acme");
  CHECK(lost1.admitted && lost1.probe && lost2.admitted && lost2.probe);
  advance(5 * MIN - 1);
  CHECK(bbt_admit(bank, PAY, "acme").reason == BB_REASON_PROBE_BUDGET);
  advance(1);
  bb_decision p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe);
  CHECK(bbt_metric(bank, "cancelled_total", "payments_client", "acme", NULL) == 2);
  /* Found again, the lost permits are late: they free no current slot. */
  CHECK_OK(bb_record(bank, lost1.permit, BB_OUTCOME_SUCCESS));
  CHECK_OK(bb_record(bank, lost2.permit, BB_OUTCOME_CANCELLED));
  CHECK(bbt_metric(bank, "late_records_total", "payments_client", "acme", NULL) == 2);
  bb_decision q = bbt_admit(bank, PAY, "acme");
  CHECK(q.admitted && q.probe);
  CHECK(bbt_admit(bank, PAY, "acme").reason == BB_REASON_PROBE_BUDGET);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_CANCELLED));
  CHECK_OK(bb_record(bank, q.permit, BB_OUTCOME_CANCELLED));
}

static void c8_closes_only_after_success_threshold(void) {
  fresh_bank();
  trip_payments("acme");
  advance(30 * SEC);
  bb_decision p1 = bbt_admit(bank, PAY, "acme");
  CHECK_OK(bb_record(bank, p1.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_HALF_OPEN); /* 1 of 2 */
  bb_decision p2 = bbt_admit(bank, PAY, "acme");
  CHECK(p2.admitted && p2.probe);
  CHECK_OK(bb_record(bank, p2.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(d.admitted && !d.probe);
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_metric(bank, "closed_total", "payments_client", "acme", NULL) == 1);
}

static void c8_probe_failure_reopens(void) {
  fresh_bank();
  trip_payments("acme");
  advance(30 * SEC);
  bb_decision p1 = bbt_admit(bank, PAY, "acme");
  CHECK_OK(bb_record(bank, p1.permit, BB_OUTCOME_SUCCESS));
  bb_decision p2 = bbt_admit(bank, PAY, "acme");
  CHECK_OK(bb_record(bank, p2.permit, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
  CHECK(bbt_metric(bank, "opened_total", "payments_client", "acme", NULL) == 2);
}

/* ---- C10: deadlines and cancellation ------------------------------------ */

static void c10_expired_deadline_is_not_admitted_nor_counted(void) {
  fresh_bank();
  /* acme has a partition: an expired deadline is counted there (C14); a
     tenant with none gets no partition from it (C9) */
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_SUCCESS));
  advance(5 * SEC);
  uint64_t now = now_ns();
  bb_decision d;
  CHECK_OK(bb_admit(bank, PAY, "acme", 4, now, &d)); /* equal to now: expired */
  CHECK(!d.admitted && d.reason == BB_REASON_DEADLINE_EXPIRED);
  CHECK(d.fallback == BB_FALLBACK_NONE && d.retry_after_ns == 0);
  CHECK_OK(bb_admit(bank, PAY, "acme", 4, now - 1, &d));
  CHECK(d.reason == BB_REASON_DEADLINE_EXPIRED);
  CHECK_OK(bb_admit(bank, PAY, "acme", 4, now + 1, &d));
  CHECK(d.admitted);
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_metric(bank, "deadline_expired_total", "payments_client", "acme", NULL) == 2);
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "acme", NULL) == 0);
  CHECK_OK(bb_admit(bank, PAY, "newcomer", 8, now, &d));
  CHECK(d.reason == BB_REASON_DEADLINE_EXPIRED);
  CHECK(bbt_metric(bank, "deadline_expired_total", "payments_client", "newcomer", NULL) == -1);
  /* an expired deadline against an open breaker still says "expired" */
  trip_payments("acme");
  CHECK_OK(bb_admit(bank, PAY, "acme", 4, now, &d));
  CHECK(d.reason == BB_REASON_DEADLINE_EXPIRED && d.fallback == BB_FALLBACK_NONE);
}

static void c10_cancelled_counts_neither_failure_nor_success(void) {
  fresh_bank();
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  for (int i = 0; i < 5; i++) {
    CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_CANCELLED));
  }
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "cancelled_total", "payments_client", "acme", NULL) == 5);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE)); /* the 3rd consecutive */
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
}

/* ---- C11: operator control ---------------------------------------------- */

static void c11_force_open_and_reset_one_partition(void) {
  fresh_bank();
  CHECK_OK(bb_force_open(bank, PAY, "acme", 4));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_FORCED_OPEN);
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_CLOSED);
  advance(100 * MIN); /* forced open ignores time */
  bb_decision d = bbt_admit(bank, PAY, "acme");
  CHECK(!d.admitted && d.reason == BB_REASON_FORCED_OPEN && d.fallback == BB_FALLBACK_ERROR);
  CHECK(bbt_metric(bank, "forced_open_rejects_total", "payments_client", "acme", NULL) == 1);
  CHECK(bbt_metric(bank, "stuck", "payments_client", "acme", NULL) <= 0);
  CHECK_OK(bb_reset(bank, PAY, "acme", 4));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_SUCCESS));
}

static void c11_reset_clears_counters_of_tripped_breaker(void) {
  fresh_bank();
  trip_payments("acme");
  CHECK_OK(bb_reset(bank, PAY, "acme", 4));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED); /* count restarted */
}

static void c11_empty_tenant_means_every_partition(void) {
  fresh_bank();
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_SUCCESS));
  CHECK_OK(bb_force_open(bank, PAY, NULL, 0));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_FORCED_OPEN);
  CHECK(bbt_state(bank, PAY, "first-seen-later") == BB_STATE_FORCED_OPEN);
  CHECK(bbt_admit(bank, PAY, "another-new-one").reason == BB_REASON_FORCED_OPEN);
  CHECK_OK(bb_reset(bank, PAY, "", 0));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_state(bank, PAY, "first-seen-later") == BB_STATE_CLOSED);
  CHECK(bbt_call(bank, PAY, "another-new-one", BB_OUTCOME_SUCCESS));
  /* a global dependency: the tenant is ignored */
  CHECK_OK(bb_force_open(bank, EMAIL, "x", 1));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_FORCED_OPEN);
  CHECK_OK(bb_reset(bank, EMAIL, NULL, 0));
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_CLOSED);
}

/* ---- C12: clock --------------------------------------------------------- */

static void c12_clock_jump_ends_open_period_but_never_closes(void) {
  fresh_bank();
  trip_payments("acme");
  advance(10ull * 365 * 24 * 60 * MIN); /* ten years */
  CHECK(bbt_state(bank, PAY, "acme") != BB_STATE_CLOSED);
  bb_decision p = bbt_admit(bank, PAY, "acme");
  CHECK(p.admitted && p.probe);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_HALF_OPEN);
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_HALF_OPEN); /* full cycle needed */
  p = bbt_admit(bank, PAY, "acme");
  CHECK_OK(bb_record(bank, p.permit, BB_OUTCOME_SUCCESS));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
}

static void c12_clock_reads_and_moves_only_when_manual(void) {
  fresh_bank();
  uint64_t t0 = now_ns();
  advance(1234);
  CHECK(now_ns() == t0 + 1234);
  bb_bank *real = bbt_bank(PROFILE, false);
  CHECK_STATUS(bb_clock_advance(real, 1), BB_ERR_NOT_MANUAL_CLOCK);
  uint64_t a = 0, b = 0;
  CHECK_OK(bb_clock_now_ns(real, &a));
  CHECK_OK(bb_clock_now_ns(real, &b));
  CHECK(b >= a);
  bb_bank_free(real);
}

/* ---- C13: permits ------------------------------------------------------- */

static void c13_outcome_of_older_generation_is_late_only(void) {
  fresh_bank();
  bb_decision old = bbt_admit(bank, EMAIL, NULL);
  CHECK(old.admitted);
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE));
  CHECK(bbt_call(bank, EMAIL, NULL, BB_OUTCOME_FAILURE)); /* trips: new generation */
  CHECK_OK(bb_record(bank, old.permit, BB_OUTCOME_FAILURE));
  CHECK(bbt_metric(bank, "late_records_total", "email_client", "global", NULL) == 1);
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 2);
  CHECK(bbt_metric(bank, "opened_total", "email_client", "global", NULL) == 1);
}

static void c13_double_record_never_double_counts(void) {
  fresh_bank();
  bb_decision d = bbt_admit(bank, PAY, "acme");
  bb_permit copy = d.permit;
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_FAILURE));
  CHECK_STATUS(bb_record(bank, d.permit, BB_OUTCOME_FAILURE), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "already recorded") != NULL);
  CHECK_STATUS(bb_record(bank, copy, BB_OUTCOME_SUCCESS), BB_ERR_INVALID_ARGUMENT);
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "acme", NULL) == 1);
  CHECK(bbt_call(bank, PAY, "acme", BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED); /* 2 failures, not 3 */

  /* a probe recorded twice neither closes early nor frees a second slot */
  trip_payments("probe-tenant");
  advance(30 * SEC);
  bb_decision p1 = bbt_admit(bank, PAY, "probe-tenant");
  bb_decision p2 = bbt_admit(bank, PAY, "probe-tenant");
  CHECK(p1.probe && p2.probe);
  CHECK_OK(bb_record(bank, p1.permit, BB_OUTCOME_SUCCESS));
  CHECK_STATUS(bb_record(bank, p1.permit, BB_OUTCOME_SUCCESS), BB_ERR_INVALID_ARGUMENT);
  CHECK(bbt_state(bank, PAY, "probe-tenant") == BB_STATE_HALF_OPEN);
  bb_decision p3 = bbt_admit(bank, PAY, "probe-tenant");
  CHECK(p3.admitted); /* p1's slot */
  CHECK(bbt_admit(bank, PAY, "probe-tenant").reason == BB_REASON_PROBE_BUDGET);
  CHECK_OK(bb_record(bank, p2.permit, BB_OUTCOME_CANCELLED));
  CHECK_OK(bb_record(bank, p3.permit, BB_OUTCOME_CANCELLED));
}

static void c13_forged_and_foreign_permits_are_rejected(void) {
  fresh_bank();
  bb_permit zero;
  memset(&zero, 0, sizeof zero);
  CHECK_STATUS(bb_record(bank, zero, BB_OUTCOME_SUCCESS), BB_ERR_INVALID_ARGUMENT);
  bb_decision d = bbt_admit(bank, EMAIL, NULL);
  CHECK(sizeof d.permit == 16);
  bb_permit forged;
  /* every bit of the 16 opaque bytes, flipped one at a time */
  for (unsigned word = 0; word < 2; word++) {
    for (unsigned bit = 0; bit < 64; bit++) {
      forged = d.permit;
      forged.opaque[word] ^= (uint64_t)1 << bit;
      CHECK_STATUS(bb_record(bank, forged, BB_OUTCOME_FAILURE), BB_ERR_INVALID_ARGUMENT);
    }
  }
  CHECK(strstr(bbt_last_error(), "altered") != NULL);
  /* made up by counting from a genuine permit's words */
  for (uint64_t k = 1; k < 64; k++) {
    forged = d.permit;
    forged.opaque[0] += k;
    CHECK_STATUS(bb_record(bank, forged, BB_OUTCOME_FAILURE), BB_ERR_INVALID_ARGUMENT);
    forged = d.permit;
    forged.opaque[1] += k << 32; /* the next entries of the same ledger */
    CHECK_STATUS(bb_record(bank, forged, BB_OUTCOME_FAILURE), BB_ERR_INVALID_ARGUMENT);
  }
  bb_bank *other = bbt_bank(PROFILE, true);
  CHECK_STATUS(bb_record(other, d.permit, BB_OUTCOME_FAILURE), BB_ERR_INVALID_ARGUMENT);
  bb_bank_free(other);
  CHECK_STATUS(bb_record(bank, d.permit, (bb_outcome)7), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "outcome") != NULL);
  /* none of the rejected attempts took it */
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  CHECK_STATUS(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS), BB_ERR_INVALID_ARGUMENT);
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 0);
}

/* C7, C13: a live probe's words mixed into another permit do not free the
   probe's slot: a permit names one entry, and only its own ticket takes it. */
static void c7_c13_a_probe_copied_into_another_permit_frees_no_slot(void) {
  fresh_bank();
  trip_payments("probe-tenant");
  advance(30 * SEC);
  bb_decision probe = bbt_admit(bank, PAY, "probe-tenant");
  bb_decision second = bbt_admit(bank, PAY, "probe-tenant");
  CHECK(probe.admitted && probe.probe && second.admitted && second.probe);
  bb_decision other = bbt_admit(bank, PAY, "closed-tenant");
  CHECK(other.admitted && !other.probe);
  bb_permit forged = other.permit;
  forged.opaque[1] = probe.permit.opaque[1]; /* the probe's entry, another ticket */
  CHECK_STATUS(bb_record(bank, forged, BB_OUTCOME_CANCELLED), BB_ERR_INVALID_ARGUMENT);
  forged = probe.permit;
  forged.opaque[1] = other.permit.opaque[1]; /* the probe's ticket, another entry */
  CHECK_STATUS(bb_record(bank, forged, BB_OUTCOME_CANCELLED), BB_ERR_INVALID_ARGUMENT);
  /* budget 2: the two real probes still hold both slots */
  CHECK(bbt_admit(bank, PAY, "probe-tenant").reason == BB_REASON_PROBE_BUDGET);
  CHECK_OK(bb_record(bank, probe.permit, BB_OUTCOME_CANCELLED));
  CHECK_OK(bb_record(bank, second.permit, BB_OUTCOME_CANCELLED));
  CHECK_OK(bb_record(bank, other.permit, BB_OUTCOME_SUCCESS));
}

static void c13_permit_of_evicted_partition_is_ignored_safely(void) {
  bb_bank *small = bbt_bank(SMALL_PROFILE, true);
  uint32_t dep = bbt_dep(small, "ledger_client");
  bb_decision held = bbt_admit(small, dep, "short-lived");
  CHECK(held.admitted);
  char tenant[32];
  for (int i = 0; i < 50; i++) { /* churn the 2-slot table */
    snprintf(tenant, sizeof tenant, "churn-%d", i);
    bbt_call(small, dep, tenant, BB_OUTCOME_SUCCESS);
  }
  CHECK_OK(bb_record(small, held.permit, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(small, dep, "churn-49") == BB_STATE_CLOSED);
  bb_bank_free(small);
}

/* ---- C14 / C15: metrics and stuck --------------------------------------- */

static void c14_prometheus_exposes_every_metric_name(void) {
  fresh_bank();
  trip_payments("acme");
  bbt_admit(bank, PAY, "acme");
  static const char *const names[] = {
      "state",           "open_seconds_total",      "open_episode_seconds",
      "opened_total",    "half_opened_total",       "closed_total",
      "rejected_open_total", "probe_rejects_total", "forced_open_rejects_total",
      "deadline_expired_total", "failures_total",   "cancelled_total",
      "late_records_total", "fallback_stale_total", "fallback_degraded_total",
      "fallback_error_total", "fallback_failures_total", "partition_overflow_total",
      "stuck"};
  char *text = bbt_prometheus(bank);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char want[96];
    snprintf(want, sizeof want, "breakerbank_%s{", names[i]);
    if (strstr(text, want) == NULL) {
      fprintf(stderr, "  missing %s\n", want);
      CHECK(strstr(text, want) != NULL);
    }
  }
  free(text);
  CHECK(bbt_metric(bank, "state", "payments_client", "acme", "open") == 1);
  CHECK(bbt_metric(bank, "opened_total", "payments_client", "acme", NULL) == 1);
  CHECK(bbt_metric(bank, "rejected_open_total", "payments_client", "acme", NULL) == 1);
  advance(10 * SEC);
  CHECK(bbt_metric(bank, "open_episode_seconds", "payments_client", "acme", NULL) >= 10);
}

static void c15_breaker_not_closed_within_recovery_bound_is_stuck(void) {
  fresh_bank();
  trip_payments("acme");
  CHECK(bbt_metric(bank, "stuck", "payments_client", "acme", NULL) == 0);
  advance(5 * MIN + 1 * SEC);
  bbt_admit(bank, PAY, "globex"); /* any activity; stuck is a function of time */
  CHECK(bbt_metric(bank, "stuck", "payments_client", "acme", NULL) == 1);
  CHECK(bbt_metric(bank, "stuck", "payments_client", "globex", NULL) == 0);
  CHECK_OK(bb_reset(bank, PAY, "acme", 4));
  CHECK(bbt_metric(bank, "stuck", "payments_client", "acme", NULL) <= 0);
}

/* ---- bad input ---------------------------------------------------------- */

static void bad_input_bank_from_yaml(void) {
  bb_bank *b = NULL;
  CHECK_STATUS(bb_bank_from_yaml(NULL, 10, true, &b), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "yaml") != NULL);
  CHECK_STATUS(bb_bank_from_yaml(PROFILE, strlen(PROFILE), true, NULL),
               BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "out") != NULL);
  CHECK_STATUS(bb_bank_from_yaml(PROFILE, SIZE_MAX, true, &b), BB_ERR_INVALID_ARGUMENT);
  static const char bad_utf8[] = "dependencies:\n  \xff\xfe: {}\n";
  CHECK_STATUS(bb_bank_from_yaml(bad_utf8, strlen(bad_utf8), true, &b),
               BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "yaml") != NULL && strstr(bbt_last_error(), "UTF-8"));
  CHECK_STATUS(bb_bank_from_yaml("", 0, true, &b), BB_ERR_CONFIG);
  CHECK(b == NULL);
  CHECK_OK(bb_bank_free(NULL));
}

static void bad_input_dependency_id(void) {
  fresh_bank();
  uint32_t id = 77;
  CHECK_STATUS(bb_dependency_id(bank, "nope", 4, &id), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK(strstr(bbt_last_error(), "nope") != NULL);
  CHECK(id == 77);
  CHECK_STATUS(bb_dependency_id(bank, "email_client_x", 12, &id), BB_OK); /* length counts */
  CHECK(id == EMAIL);
  CHECK_STATUS(bb_dependency_id(NULL, "email_client", 12, &id), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "bank") != NULL);
  CHECK_STATUS(bb_dependency_id(bank, NULL, 12, &id), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_dependency_id(bank, "email_client", 12, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_dependency_id(bank, "\xc3\x28", 2, &id), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "name") != NULL);
}

static void bad_input_admit(void) {
  fresh_bank();
  bb_decision d, poison;
  memset(&poison, 0xAB, sizeof poison);
  d = poison;
  CHECK_STATUS(bb_admit(NULL, PAY, "a", 1, 0, &d), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_admit(bank, PAY, "a", 1, 0, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_admit(bank, 999, "a", 1, 0, &d), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK(strstr(bbt_last_error(), "999") != NULL);
  CHECK_STATUS(bb_admit(bank, PAY, NULL, 3, 0, &d), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "tenant") != NULL);
  CHECK_STATUS(bb_admit(bank, PAY, "a", SIZE_MAX, 0, &d), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_admit(bank, PAY, "\xe2\x82", 2, 0, &d), BB_ERR_INVALID_TENANT); /* C9 */
  CHECK(strstr(bbt_last_error(), "tenant") != NULL && strstr(bbt_last_error(), "UTF-8"));
  CHECK_STATUS(bb_admit(bank, PAY, NULL, 0, 0, &d), BB_ERR_TENANT_REQUIRED);
  CHECK(strstr(bbt_last_error(), "payments_client") != NULL);
  CHECK_STATUS(bb_admit(bank, PAY, "x", 0, 0, &d), BB_ERR_TENANT_REQUIRED);
  CHECK(memcmp(&d, &poison, sizeof d) == 0); /* never written on failure */
  /* a global dependency needs no tenant */
  CHECK_OK(bb_admit(bank, EMAIL, NULL, 0, 0, &d));
  CHECK(d.admitted);
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  CHECK_STATUS(bb_record(NULL, d.permit, BB_OUTCOME_SUCCESS), BB_ERR_INVALID_ARGUMENT);
}

static void bad_input_state_reset_force_open(void) {
  fresh_bank();
  bb_breaker_state st = 42;
  CHECK_STATUS(bb_state(bank, PAY, NULL, 0, &st), BB_ERR_TENANT_REQUIRED);
  CHECK_STATUS(bb_state(bank, PAY, "", 0, &st), BB_ERR_TENANT_REQUIRED);
  CHECK_STATUS(bb_state(bank, 12, "a", 1, &st), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK_STATUS(bb_state(bank, PAY, "a", 1, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_state(bank, PAY, "\x80", 1, &st), BB_ERR_INVALID_TENANT);
  CHECK(st == 42);
  CHECK_STATUS(bb_reset(bank, 12, NULL, 0), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK_STATUS(bb_force_open(NULL, PAY, NULL, 0), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_force_open(bank, PAY, NULL, 5), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_reset(bank, PAY, "\xff", 1), BB_ERR_INVALID_TENANT);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED); /* nothing was forced */
  CHECK_STATUS(bb_clock_now_ns(bank, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_clock_now_ns(NULL, &(uint64_t){0}), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_clock_advance(NULL, 1), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_set_listener(NULL, NULL, NULL), BB_ERR_INVALID_ARGUMENT);
}

static void bad_input_buffers(void) {
  fresh_bank();
  trip_payments("acme");
  size_t need = 0, n = 0;
  CHECK_STATUS(bb_metrics_prometheus(bank, NULL, 0, &need), BB_ERR_BUFFER_TOO_SMALL);
  CHECK(need > 0);
  char small[8] = "unused!";
  n = 0;
  CHECK_STATUS(bb_metrics_prometheus(bank, small, sizeof small, &n), BB_ERR_BUFFER_TOO_SMALL);
  CHECK(n == need);
  CHECK(strstr(bbt_last_error(), "buffer too small") != NULL);
  CHECK_STATUS(bb_metrics_prometheus(bank, NULL, 10, &n), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_metrics_prometheus(bank, small, sizeof small, NULL), BB_ERR_INVALID_ARGUMENT);
  char *buf = malloc(need);
  CHECK_OK(bb_metrics_prometheus(bank, buf, need, &n)); /* exact fit, no NUL */
  CHECK(n == need && (memcmp(buf, "breakerbank_", 12) == 0 || buf[0] == '#'));
  free(buf);

  /* bb_last_error: size query, small buffer, and it does not clobber itself */
  CHECK_STATUS(bb_dependency_id(bank, "missing", 7, &(uint32_t){0}), BB_ERR_UNKNOWN_DEPENDENCY);
  size_t len = 0;
  CHECK_STATUS(bb_last_error(NULL, 0, &len), BB_ERR_BUFFER_TOO_SMALL);
  CHECK(len > 0);
  char tiny[4];
  CHECK_STATUS(bb_last_error(tiny, sizeof tiny, &n), BB_ERR_BUFFER_TOO_SMALL);
  CHECK(n == len);
  CHECK_STATUS(bb_last_error(tiny, sizeof tiny, NULL), BB_ERR_INVALID_ARGUMENT);
  char *msg = malloc(len);
  CHECK_OK(bb_last_error(msg, len, &n));
  CHECK(n == len && memcmp(msg, "no dependency named `missing`", n < 29 ? n : 29) == 0);
  free(msg);
  CHECK(strstr(bbt_last_error(), "missing") != NULL);
}

int main(void) {
  RUN(c1_dependencies_never_share_a_breaker);
  RUN(c9_one_tenants_failures_never_touch_another);
  RUN(c9_global_dependency_ignores_tenant);
  RUN(c9_full_table_routes_to_overflow_partition);
  RUN(c9_idle_partitions_are_evicted_memory_stays_bounded);
  RUN(c2_route_like_names_are_rejected);
  RUN(c6_open_duration_is_required);
  RUN(c6_config_errors_name_dependency_and_field);
  RUN(c5_consecutive_failures_trip_and_success_resets_count);
  RUN(c5_failure_rate_trips_at_rate_with_min_calls);
  RUN(c5_slow_call_counts_as_failure);
  RUN(c3_open_rejects_into_declared_fallback);
  RUN(c4_retry_after_is_time_until_next_probe);
  RUN(c6_open_period_then_probe_with_backoff);
  RUN(c7_probe_budget_caps_probes_in_flight);
  RUN(c7_c13_earlier_episode_probe_holds_its_slot);
  RUN(c7_lost_probe_permits_give_their_slots_back_after_probe_timeout);
  RUN(c8_closes_only_after_success_threshold);
  RUN(c8_probe_failure_reopens);
  RUN(c10_expired_deadline_is_not_admitted_nor_counted);
  RUN(c10_cancelled_counts_neither_failure_nor_success);
  RUN(c11_force_open_and_reset_one_partition);
  RUN(c11_reset_clears_counters_of_tripped_breaker);
  RUN(c11_empty_tenant_means_every_partition);
  RUN(c12_clock_jump_ends_open_period_but_never_closes);
  RUN(c12_clock_reads_and_moves_only_when_manual);
  RUN(c13_outcome_of_older_generation_is_late_only);
  RUN(c13_double_record_never_double_counts);
  RUN(c13_forged_and_foreign_permits_are_rejected);
  RUN(c7_c13_a_probe_copied_into_another_permit_frees_no_slot);
  RUN(c13_permit_of_evicted_partition_is_ignored_safely);
  RUN(c14_prometheus_exposes_every_metric_name);
  RUN(c15_breaker_not_closed_within_recovery_bound_is_stuck);
  RUN(bad_input_bank_from_yaml);
  RUN(bad_input_dependency_id);
  RUN(bad_input_admit);
  RUN(bad_input_state_reset_force_open);
  RUN(bad_input_buffers);
  bb_bank_free(bank);
  return bbt_summary();
}
