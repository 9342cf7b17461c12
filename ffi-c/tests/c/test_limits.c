/*
 * C9's input limits at the ABI: tenant ids are 1 to 256 bytes (a longer
 * one is BB_ERR_INVALID_TENANT from every function taking a tenant and
 * counts against nothing).
 */
#include <stdint.h>

#include "bbtest.h"

static const char PROFILE[] =
    "dependencies:\n"
    "  payments_client:\n"
    "    isolation: tenant\n"
    "    trip: {consecutive_failures: 1}\n"
    "    open_duration: 30s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}\n"
    "    recovery_bound: 5m\n"
    "    max_tenants: 4\n"
    "  email_client:\n"
    "    isolation: global\n"
    "    trip: {consecutive_failures: 1}\n"
    "    open_duration: 30s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: degraded}\n"
    "    recovery_bound: 5m\n";

/* A malloc'd id of `len` bytes of 'x' (not NUL-terminated for the ABI,
 * but NUL-terminated here for convenience). */
static char *id_of(size_t len) {
  char *id = malloc(len + 1);
  if (id == NULL) {
    exit(2);
  }
  memset(id, 'x', len);
  id[len] = '\0';
  return id;
}

static size_t prometheus_size(const bb_bank *bank) {
  size_t need = 0;
  bb_status s = bb_metrics_prometheus(bank, NULL, 0, &need);
  CHECK(s == BB_OK || s == BB_ERR_BUFFER_TOO_SMALL);
  return need;
}

static void c9_tenant_ids_longer_than_256_bytes_are_refused(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  uint32_t pay = bbt_dep(bank, "payments_client");
  CHECK(bbt_call(bank, pay, "acme", BB_OUTCOME_SUCCESS));
  size_t before = prometheus_size(bank);
  const size_t lens[] = {257, (size_t)1 << 20};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    char *id = id_of(lens[k]);
    char len_text[32];
    snprintf(len_text, sizeof len_text, "%zu", lens[k]);
    bb_decision d;
    memset(&d, 0, sizeof d);
    CHECK_STATUS(bb_admit(bank, pay, id, lens[k], 0, &d), BB_ERR_INVALID_TENANT);
    CHECK(strstr(bbt_last_error(), "256") != NULL);
    CHECK(strstr(bbt_last_error(), len_text) != NULL);
    CHECK(!d.admitted);
    if (d.admitted) {
      CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_CANCELLED));
    }
    bb_breaker_state st = BB_STATE_CLOSED;
    CHECK_STATUS(bb_state(bank, pay, id, lens[k], &st), BB_ERR_INVALID_TENANT);
    CHECK_STATUS(bb_force_open(bank, pay, id, lens[k]), BB_ERR_INVALID_TENANT);
    CHECK_STATUS(bb_reset(bank, pay, id, lens[k]), BB_ERR_INVALID_TENANT);
    free(id);
  }
  /* Counted against nothing: no partition, no overflow line, and the
   * forced open above isolated no one. */
  size_t after = prometheus_size(bank);
  CHECK(after == before);
  CHECK(after < 16 * 1024);
  CHECK(bbt_state(bank, pay, "acme") == BB_STATE_CLOSED);
  CHECK(bbt_state(bank, pay, "globex") == BB_STATE_CLOSED);
  CHECK(bbt_metric(bank, "partition_overflow_total", "payments_client", "<overflow>", NULL) <= 0);
  bb_bank_free(bank);
}

static void c9_a_one_megabyte_tenant_id_leaves_prometheus_small(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  uint32_t pay = bbt_dep(bank, "payments_client");
  size_t len = (size_t)1 << 20;
  char *id = id_of(len);
  bb_decision d;
  memset(&d, 0, sizeof d);
  /* Fail the admission, as a flood of ids would, so its partition would
   * have counts to report. */
  if (bb_admit(bank, pay, id, len, 0, &d) == BB_OK && d.admitted) {
    CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_FAILURE));
  }
  size_t size = prometheus_size(bank);
  if (size >= 16 * 1024) {
    fprintf(stderr, "  prometheus text is %zu bytes after one 1 MiB tenant id\n", size);
  }
  CHECK(size < 16 * 1024);
  free(id);
  bb_bank_free(bank);
}

static void c9_a_256_byte_tenant_id_is_accepted(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  uint32_t pay = bbt_dep(bank, "payments_client");
  char *id = id_of(256);
  bb_decision d;
  memset(&d, 0, sizeof d);
  CHECK_OK(bb_admit(bank, pay, id, 256, 0, &d));
  CHECK(d.admitted);
  if (d.admitted) {
    CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_FAILURE));
  }
  bb_breaker_state st = BB_STATE_CLOSED;
  CHECK_OK(bb_state(bank, pay, id, 256, &st));
  CHECK(st == BB_STATE_OPEN);
  CHECK_OK(bb_reset(bank, pay, id, 256));
  CHECK_OK(bb_force_open(bank, pay, id, 256));
  CHECK(bbt_metric(bank, "opened_total", "payments_client", id, NULL) == 1);
  free(id);
  bb_bank_free(bank);
}

static void c9_a_global_dependency_ignores_the_tenant(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  uint32_t email = bbt_dep(bank, "email_client");
  char *id = id_of(257);
  bb_decision d;
  memset(&d, 0, sizeof d);
  CHECK_OK(bb_admit(bank, email, id, 257, 0, &d));
  CHECK(d.admitted);
  if (d.admitted) {
    CHECK_OK(bb_record(bank, d.permit, BB_OUTCOME_SUCCESS));
  }
  free(id);
  bb_bank_free(bank);
}

int main(void) {
  RUN(c9_tenant_ids_longer_than_256_bytes_are_refused);
  RUN(c9_a_one_megabyte_tenant_id_leaves_prometheus_small);
  RUN(c9_a_256_byte_tenant_id_is_accepted);
  RUN(c9_a_global_dependency_ignores_the_tenant);
  return bbt_summary();
}
