/*
 * C20 at the ABI: bb_bank_reload puts a new profile in force, all or
 * nothing; kept dependencies keep their ids and state, removed ones answer
 * BB_ERR_UNKNOWN_DEPENDENCY while their outstanding permits are still
 * redeemed once, one that needs new partitions starts afresh under a new
 * id, and each reload is announced to the listener.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <time.h>

#include "bbtest.h"

/* svc_client trips after `n` failures; email_client is there or not. */
static void profile(char *out, size_t cap, int n, int with_email, const char *svc_trip) {
  char trip[128];
  if (svc_trip == NULL) {
    snprintf(trip, sizeof trip, "{consecutive_failures: %d}", n);
    svc_trip = trip;
  }
  snprintf(out, cap,
           "dependencies:\n"
           "  svc_client:\n"
           "    isolation: global\n"
           "    trip: %s\n"
           "    open_duration: 30s\n"
           "    half_open: {probe_budget: 1, success_threshold: 1}\n"
           "    fallback: {kind: error, code: SVC_DOWN}\n"
           "    recovery_bound: 5m\n"
           "%s",
           svc_trip,
           with_email ? "  email_client:\n"
                        "    isolation: global\n"
                        "    trip: {consecutive_failures: 1}\n"
                        "    open_duration: 30s\n"
                        "    half_open: {probe_budget: 1, success_threshold: 1}\n"
                        "    fallback: {kind: degraded}\n"
                        "    recovery_bound: 5m\n"
                      : "");
}

static bb_status reload(const bb_bank *bank, const char *yaml) {
  return bb_bank_reload(bank, yaml, strlen(yaml));
}

static void fail_once(const bb_bank *bank, uint32_t dep) {
  bb_decision d = bbt_admit(bank, dep, NULL);
  CHECK(d.admitted);
  CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_FAILURE));
}

/* A bank of svc_client (tripping after `n` failures) and email_client,
 * with one failure of svc_client counted; `*svc` is its id. */
static bb_bank *one_failure_counted(char *yaml, size_t cap, int n, uint32_t *svc) {
  profile(yaml, cap, n, 1, NULL);
  bb_bank *bank = bbt_bank(yaml, true);
  *svc = bbt_dep(bank, "svc_client");
  fail_once(bank, *svc);
  return bank;
}

static void c20_reload_keeps_state_and_applies_new_thresholds(void) {
  char yaml[2048];
  uint32_t svc;
  bb_bank *bank = one_failure_counted(yaml, sizeof yaml, 5, &svc);
  fail_once(bank, svc);
  bb_decision held = bbt_admit(bank, svc, NULL);
  CHECK(held.admitted);

  profile(yaml, sizeof yaml, 3, 1, NULL);
  CHECK_OK(reload(bank, yaml));
  CHECK(bbt_dep(bank, "svc_client") == svc);
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  /* The permit admitted before the reload counts: the third failure
   * trips under the new threshold. */
  CHECK_OK(bb_record(bank, held.permit, BB_OUTCOME_FAILURE));
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_OPEN);
  bb_bank_free(bank);
}

static void c20_a_bad_profile_changes_nothing(void) {
  char yaml[2048];
  uint32_t svc;
  bb_bank *bank = one_failure_counted(yaml, sizeof yaml, 2, &svc);

  CHECK_STATUS(reload(bank, "dependencies: {}\nbogus: 1\n"), BB_ERR_CONFIG);
  CHECK(strstr(bbt_last_error(), "bogus") != NULL);
  profile(yaml, sizeof yaml, 0, 0,
          "{failure_rate: 1.5, min_calls: 4, window: 10s}");
  CHECK_STATUS(reload(bank, yaml), BB_ERR_CONFIG);
  CHECK(strstr(bbt_last_error(), "svc_client") != NULL);
  CHECK(strstr(bbt_last_error(), "failure_rate") != NULL);
  CHECK_STATUS(bb_bank_reload(bank, NULL, 4), BB_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(bb_bank_reload(NULL, yaml, strlen(yaml)), BB_ERR_INVALID_ARGUMENT);

  /* email_client is still there, and svc_client still trips on its
   * second failure (the count of one was kept, the threshold too). */
  uint32_t email = bbt_dep(bank, "email_client");
  CHECK(bbt_state(bank, email, NULL) == BB_STATE_CLOSED);
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_CLOSED);
  fail_once(bank, svc);
  CHECK(bbt_state(bank, svc, NULL) == BB_STATE_OPEN);
  bb_bank_free(bank);
}

static void c20_removed_dependency_refuses_and_its_permits_are_redeemed_once(void) {
  char yaml[2048];
  profile(yaml, sizeof yaml, 2, 1, NULL);
  bb_bank *bank = bbt_bank(yaml, true);
  uint32_t email = bbt_dep(bank, "email_client");
  bb_decision held = bbt_admit(bank, email, NULL);
  CHECK(held.admitted);

  profile(yaml, sizeof yaml, 2, 0, NULL);
  CHECK_OK(reload(bank, yaml));
  uint32_t id = 0;
  CHECK_STATUS(bb_dependency_id(bank, "email_client", strlen("email_client"), &id),
               BB_ERR_UNKNOWN_DEPENDENCY);
  bb_decision d;
  CHECK_STATUS(bb_admit(bank, email, NULL, 0, 0, &d), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK(strstr(bbt_last_error(), "email_client") != NULL);
  CHECK(strstr(bbt_last_error(), "reload") != NULL);
  bb_breaker_state st;
  CHECK_STATUS(bb_state(bank, email, NULL, 0, &st), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK_STATUS(bb_reset(bank, email, NULL, 0), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK_STATUS(bb_force_open(bank, email, NULL, 0), BB_ERR_UNKNOWN_DEPENDENCY);
  /* The permit issued before is redeemed (its ledger slot freed), once. */
  CHECK_OK(bb_record(bank, held.permit, BB_OUTCOME_SUCCESS));
  CHECK_STATUS(bb_record(bank, held.permit, BB_OUTCOME_SUCCESS), BB_ERR_INVALID_ARGUMENT);

  /* Added back: a new id, a fresh breaker; the old id still refuses. */
  profile(yaml, sizeof yaml, 2, 1, NULL);
  CHECK_OK(reload(bank, yaml));
  uint32_t back = bbt_dep(bank, "email_client");
  CHECK(back != email);
  CHECK(bbt_state(bank, back, NULL) == BB_STATE_CLOSED);
  CHECK_STATUS(bb_admit(bank, email, NULL, 0, 0, &d), BB_ERR_UNKNOWN_DEPENDENCY);
  bb_bank_free(bank);
}

static void c20_a_trip_kind_change_starts_the_dependency_afresh(void) {
  char yaml[2048];
  uint32_t svc;
  bb_bank *bank = one_failure_counted(yaml, sizeof yaml, 2, &svc);
  profile(yaml, sizeof yaml, 0, 1,
          "{failure_rate: 0.5, min_calls: 4, window: 10s}");
  CHECK_OK(reload(bank, yaml));
  /* A new id, closed; the old id answers as a removed one's does. */
  uint32_t fresh = bbt_dep(bank, "svc_client");
  CHECK(fresh != svc);
  bb_decision d;
  CHECK_STATUS(bb_admit(bank, svc, NULL, 0, 0, &d), BB_ERR_UNKNOWN_DEPENDENCY);
  CHECK(strstr(bbt_last_error(), "afresh") != NULL);
  /* The failure rate is in force: three failures are under min_calls. */
  for (int i = 0; i < 3; i++) fail_once(bank, fresh);
  CHECK(bbt_state(bank, fresh, NULL) == BB_STATE_CLOSED);
  fail_once(bank, fresh);
  CHECK(bbt_state(bank, fresh, NULL) == BB_STATE_OPEN);
  bb_bank_free(bank);
}

static atomic_int reloads_seen;

static void on_event(void *user_data, const bb_event *e) {
  (void)user_data;
  if (e->kind == BB_EVENT_RELOAD && e->partition_len == 1 && e->partition[0] == '*') {
    atomic_fetch_add(&reloads_seen, 1);
  }
}

static void c20_a_reload_is_an_event(void) {
  char yaml[2048];
  profile(yaml, sizeof yaml, 2, 1, NULL);
  bb_bank *bank = bbt_bank(yaml, true);
  CHECK_OK(bb_set_listener(bank, on_event, NULL));
  profile(yaml, sizeof yaml, 3, 0, NULL);
  CHECK_OK(reload(bank, yaml));
  /* svc_client kept, email_client removed: two events. */
  for (int i = 0; i < 400 && atomic_load(&reloads_seen) < 2; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(atomic_load(&reloads_seen) == 2);
  bb_bank_free(bank);
}

int main(void) {
  RUN(c20_reload_keeps_state_and_applies_new_thresholds);
  RUN(c20_a_bad_profile_changes_nothing);
  RUN(c20_removed_dependency_refuses_and_its_permits_are_redeemed_once);
  RUN(c20_a_trip_kind_change_starts_the_dependency_afresh);
  RUN(c20_a_reload_is_an_event);
  return bbt_summary();
}
