/*
 * bb_call: admit, run the caller's function, record what it returns; and
 * permits that bb_admit issued and the caller lost.
 */
#include <stdint.h>

#include "bbtest.h"

#define MS 1000000ull
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
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}\n"
    "    recovery_bound: 5m\n"
    "  email_client:\n"
    "    isolation: global\n"
    "    trip: {consecutive_failures: 2, slow_call: 1s}\n"
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

/* What the callback saw and does. */
struct job {
  int calls;
  bool probe;
  uint64_t takes_ns; /* advances the manual clock by this while "running" */
  bb_outcome outcome;
  uint32_t raw_outcome; /* returned instead when non-zero */
  bool nested;          /* calls bb_call on another dependency from inside */
  bb_status nested_status;
};

static bb_outcome run(void *ctx, bool probe) {
  struct job *j = ctx;
  j->calls++;
  j->probe = probe;
  if (j->takes_ns) {
    bb_clock_advance(bank, j->takes_ns);
  }
  if (j->nested) {
    struct job inner = {.outcome = BB_OUTCOME_SUCCESS};
    bb_decision d;
    j->nested_status = bb_call(bank, EMAIL, NULL, 0, 0, run, &inner, &d);
  }
  if (j->raw_outcome) {
    bb_outcome o;
    memcpy(&o, &j->raw_outcome, sizeof o);
    return o;
  }
  return j->outcome;
}

static bb_status call(uint32_t dep, const char *tenant, struct job *j, bb_decision *d) {
  memset(d, 0xA5, sizeof *d);
  return bb_call(bank, dep, tenant, tenant ? strlen(tenant) : 0, 0, run, j, d);
}

static void c13_bb_call_runs_the_function_once_and_records_its_outcome(void) {
  fresh_bank();
  struct job j = {.outcome = BB_OUTCOME_FAILURE};
  bb_decision d;
  for (int i = 0; i < 3; i++) {
    CHECK_OK(call(PAY, "acme", &j, &d));
    CHECK(d.admitted && !d.probe && d.reason == BB_REASON_NONE);
    CHECK(d.fallback == BB_FALLBACK_NONE && d.retry_after_ns == 0);
    CHECK(d.permit.opaque[0] == 0 && d.permit.opaque[1] == 0);
  }
  CHECK(j.calls == 3);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_OPEN);
  CHECK(bbt_state(bank, PAY, "globex") == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "acme", NULL) == 3);
}

static void c3_bb_call_refused_does_not_run_and_names_the_fallback(void) {
  fresh_bank();
  struct job j = {.outcome = BB_OUTCOME_FAILURE};
  bb_decision d;
  for (int i = 0; i < 3; i++) {
    CHECK_OK(call(PAY, "acme", &j, &d));
  }
  j.calls = 0;
  CHECK_OK(call(PAY, "acme", &j, &d));
  CHECK(j.calls == 0);
  CHECK(!d.admitted && !d.probe && d.reason == BB_REASON_OPEN);
  CHECK(d.fallback == BB_FALLBACK_ERROR && d.retry_after_ns == 30 * SEC);
  CHECK(d.permit.opaque[0] == 0 && d.permit.opaque[1] == 0);
  /* an expired deadline: not run, no fallback */
  uint64_t now = 0;
  CHECK_OK(bb_clock_advance(bank, 5));
  CHECK_OK(bb_clock_now_ns(bank, &now));
  CHECK_OK(bb_call(bank, PAY, "globex", 6, now, run, &j, &d));
  CHECK(j.calls == 0 && !d.admitted && d.reason == BB_REASON_DEADLINE_EXPIRED);
  CHECK(d.fallback == BB_FALLBACK_NONE);
}

static void c7_bb_call_tells_the_function_it_is_a_probe(void) {
  fresh_bank();
  struct job j = {.outcome = BB_OUTCOME_FAILURE};
  bb_decision d;
  for (int i = 0; i < 3; i++) {
    CHECK_OK(call(PAY, "acme", &j, &d));
  }
  CHECK_OK(bb_clock_advance(bank, 30 * SEC));
  j.outcome = BB_OUTCOME_SUCCESS;
  CHECK_OK(call(PAY, "acme", &j, &d));
  CHECK(j.probe && d.admitted && d.probe);
  CHECK(bbt_state(bank, PAY, "acme") == BB_STATE_CLOSED);
}

/* C5, C10: slow_call is judged from admission to the function's return. */
static void c5_bb_call_judges_slow_call_around_the_function(void) {
  fresh_bank();
  struct job slow = {.outcome = BB_OUTCOME_SUCCESS, .takes_ns = 1 * SEC};
  struct job quick = {.outcome = BB_OUTCOME_SUCCESS, .takes_ns = 999 * MS};
  bb_decision d;
  CHECK_OK(call(EMAIL, NULL, &quick, &d));
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 0);
  CHECK_OK(call(EMAIL, NULL, &slow, &d));
  CHECK_OK(call(EMAIL, NULL, &slow, &d));
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 2);
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
}

/* C10: a function that gave up (BB_OUTCOME_CANCELLED) after running
   slow_call is a slow failure; before slow_call it stays cancelled. */
static void c10_bb_call_cancelled_after_slow_call_is_a_slow_failure(void) {
  fresh_bank();
  struct job hung = {.outcome = BB_OUTCOME_CANCELLED, .takes_ns = 1 * SEC};
  struct job early = {.outcome = BB_OUTCOME_CANCELLED, .takes_ns = 999 * MS};
  bb_decision d;
  CHECK_OK(call(EMAIL, NULL, &early, &d));
  CHECK(bbt_metric(bank, "cancelled_total", "email_client", "global", NULL) == 1);
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 0);
  CHECK_OK(call(EMAIL, NULL, &hung, &d));
  CHECK_OK(call(EMAIL, NULL, &hung, &d));
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 2);
  CHECK(bbt_metric(bank, "cancelled_total", "email_client", "global", NULL) == 1);
  CHECK(bbt_state(bank, EMAIL, NULL) == BB_STATE_OPEN);
}

static void c13_bb_call_with_a_bad_outcome_or_no_function_is_refused(void) {
  fresh_bank();
  bb_decision d;
  struct job j = {.raw_outcome = 77};
  CHECK_STATUS(call(PAY, "acme", &j, &d), BB_ERR_INVALID_ARGUMENT);
  CHECK(j.calls == 1);
  CHECK(strstr(bbt_last_error(), "77") != NULL);
  /* counted as cancelled: nothing toward the trip */
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "acme", NULL) <= 0);
  CHECK_STATUS(bb_call(bank, PAY, "acme", 4, 0, NULL, &j, &d), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bbt_last_error(), "`fn`") != NULL);
  CHECK_STATUS(bb_call(bank, PAY, "acme", 4, 0, run, &j, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_call(bank, PAY, NULL, 0, 0, run, &j, &d), BB_ERR_TENANT_REQUIRED);
  CHECK_STATUS(bb_call(bank, 99, NULL, 0, 0, run, &j, &d), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK(j.calls == 1);
}

static void bb_call_may_be_nested(void) {
  fresh_bank();
  struct job j = {.outcome = BB_OUTCOME_SUCCESS, .nested = true};
  bb_decision d;
  CHECK_OK(call(PAY, "acme", &j, &d));
  CHECK(j.calls == 1 && j.nested_status == BB_OK && d.admitted);
}

/*
 * C7, C13: permits a caller loses (admitted, never recorded) do not make
 * later permits fail, and a thread that lost many keeps admitting and
 * recording; every permit still counts once.
 */
static void c13_many_lost_permits_leave_later_ones_counting_once(void) {
  fresh_bank();
  for (int i = 0; i < 5000; i++) {
    bb_decision lost = bbt_admit(bank, EMAIL, NULL);
    CHECK(lost.admitted);
  }
  for (int i = 0; i < 1000; i++) {
    bb_decision d = bbt_admit(bank, EMAIL, NULL);
    CHECK(d.admitted);
    CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
    CHECK_STATUS(bb_record(bank, d.permit, BB_OUTCOME_FAILURE), BB_ERR_INVALID_ARGUMENT);
  }
  CHECK(bbt_metric(bank, "failures_total", "email_client", "global", NULL) == 0);
}

int main(void) {
  RUN(c13_bb_call_runs_the_function_once_and_records_its_outcome);
  RUN(c3_bb_call_refused_does_not_run_and_names_the_fallback);
  RUN(c7_bb_call_tells_the_function_it_is_a_probe);
  RUN(c5_bb_call_judges_slow_call_around_the_function);
  RUN(c10_bb_call_cancelled_after_slow_call_is_a_slow_failure);
  RUN(c13_bb_call_with_a_bad_outcome_or_no_function_is_refused);
  RUN(bb_call_may_be_nested);
  RUN(c13_many_lost_permits_leave_later_ones_counting_once);
  bb_bank_free(bank);
  return bbt_summary();
}
