/*
 * C9's input limits at the ABI: tenant ids are 1 to 256 bytes (a longer
 * one is BB_ERR_INVALID_TENANT from every function taking a tenant and
 * counts against nothing), and a profile whose partitions cannot be
 * allocated is BB_ERR_CONFIG from bb_bank_from_yaml, never an abort.
 *
 * Allocation failure is provoked with an address-space limit
 * (setrlimit(RLIMIT_AS)) in a forked child, so an abort shows up as the
 * child's signal. Under AddressSanitizer, whose shadow memory already
 * exceeds any such limit, ASan's own allocator refuses large allocations
 * instead (see __asan_default_options below).
 */
#define _XOPEN_SOURCE 700

#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bbtest.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BBT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define BBT_ASAN 1
#endif

#ifdef BBT_ASAN
/* Allocations above 48 MiB fail (return NULL) instead of ending the run:
 * a table of 1,000,000 tenants needs a 61 MiB arena. The make target's
 * ASAN_OPTIONS do not set these two, so these defaults hold. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=48";
}
#endif

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

/* C9: reserved partition names, ids holding a control character (NUL
 * included) and bytes that are not UTF-8 name no partition either: each
 * is BB_ERR_INVALID_TENANT, its message says what is wrong, and nothing
 * is counted (no `<overflow>` series a tenant could merge into). */
static void c9_reserved_names_control_characters_and_bad_utf8_are_invalid_tenants(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  uint32_t pay = bbt_dep(bank, "payments_client");
  size_t before = prometheus_size(bank);
  static const struct {
    const char *id;
    size_t len;
    const char *says;
  } refused[] = {
      {"global", 6, "reserved"},
      {"<overflow>", 10, "reserved"},
      {"*", 1, "reserved"},
      {"\0", 1, "control character"},
      {"ac\0me", 5, "at byte 2"},
      {"a\nb", 3, "U+000A"},
      {"ab\xed\xa0\x80", 5, "not valid UTF-8"},
      {"\xff", 1, "from byte 0"},
  };
  for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
    const char *id = refused[k].id;
    size_t len = refused[k].len;
    bb_decision d;
    memset(&d, 0, sizeof d);
    CHECK_STATUS(bb_admit(bank, pay, id, len, 0, &d), BB_ERR_INVALID_TENANT);
    CHECK(strstr(bbt_last_error(), refused[k].says) != NULL);
    CHECK(!d.admitted);
    bb_breaker_state st = BB_STATE_CLOSED;
    CHECK_STATUS(bb_state(bank, pay, id, len, &st), BB_ERR_INVALID_TENANT);
    CHECK_STATUS(bb_force_open(bank, pay, id, len), BB_ERR_INVALID_TENANT);
    CHECK_STATUS(bb_reset(bank, pay, id, len), BB_ERR_INVALID_TENANT);
    CHECK_STATUS(bb_trip(bank, pay, id, len), BB_ERR_INVALID_TENANT);
  }
  CHECK(prometheus_size(bank) == before);
  CHECK(bbt_metric(bank, "partition_overflow_total", "payments_client", "<overflow>", NULL) <= 0);
  CHECK(bbt_state(bank, pay, "acme") == BB_STATE_CLOSED);
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

/* ---- building a bank never aborts -------------------------------------- */

/* `count` tenant-scoped dependencies of `max_tenants` each, after `head`. */
static char *many_dependencies(const char *head, int count, const char *max_tenants) {
  size_t cap = strlen(head) + (size_t)count * 512 + 1;
  char *yaml = malloc(cap);
  if (yaml == NULL) {
    exit(2);
  }
  size_t n = (size_t)snprintf(yaml, cap, "%sdependencies:\n", head);
  for (int i = 0; i < count; i++) {
    n += (size_t)snprintf(yaml + n, cap - n,
                          "  client_%02d:\n"
                          "    isolation: tenant\n"
                          "    trip: {consecutive_failures: 5}\n"
                          "    open_duration: 30s\n"
                          "    half_open: {probe_budget: 1, success_threshold: 1}\n"
                          "    fallback: {kind: error, code: DOWN}\n"
                          "    recovery_bound: 5m\n"
                          "    max_tenants: %s\n",
                          i, max_tenants);
  }
  return yaml;
}

/* Builds a bank from `yaml` (in a child under an address-space limit of
 * its current size plus `headroom` bytes, where that works) and checks it
 * fails with BB_ERR_CONFIG and a message mentioning `must_mention`. */
static void expect_config_error_under_limit(const char *yaml, size_t headroom,
                                            const char *must_mention) {
#ifdef BBT_ASAN
  (void)headroom;
  bb_bank *bank = NULL;
  CHECK_STATUS(bb_bank_from_yaml(yaml, strlen(yaml), true, &bank), BB_ERR_CONFIG);
  CHECK(bank == NULL);
  CHECK(strstr(bbt_last_error(), must_mention) != NULL);
  bb_bank_free(bank);
#else
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm == NULL || fscanf(statm, "%ld", &pages) != 1) {
      _exit(3);
    }
    fclose(statm);
    struct rlimit lim;
    lim.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)headroom;
    lim.rlim_max = lim.rlim_cur;
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
      _exit(3);
    }
    bb_bank *bank = NULL;
    bb_status s = bb_bank_from_yaml(yaml, strlen(yaml), true, &bank);
    const char *msg = bbt_last_error();
    if (s != BB_ERR_CONFIG || bank != NULL || strstr(msg, must_mention) == NULL) {
      fprintf(stderr, "  child: bb_bank_from_yaml returned %u (%s), want BB_ERR_CONFIG "
                      "mentioning `%s`\n", (unsigned)s, msg, must_mention);
      _exit(1);
    }
    printf("  child: BB_ERR_CONFIG: %.200s\n", msg);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "  child killed by signal %d%s\n", WTERMSIG(status),
            WTERMSIG(status) == SIGABRT ? " (abort)" : "");
  }
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
}

/* The profile: four dependencies of 16,777,216 tenants each, 926
 * bytes, under a 4 GiB limit. */
static void c9_a_profile_over_the_max_tenants_cap_is_a_config_error(void) {
  char *yaml = many_dependencies("", 4, "16777216");
  expect_config_error_under_limit(yaml, (size_t)4 << 30, "max_tenants");
  free(yaml);
}

/* Within every profile limit (memory_limit raised), but more than the
 * process may map: the allocation fails and says so. */
static void c9_an_allocation_failure_building_a_bank_is_a_config_error(void) {
  char *yaml = many_dependencies("memory_limit: 64GiB\n", 12, "1000000");
  expect_config_error_under_limit(yaml, (size_t)256 << 20, "allocate");
  free(yaml);
}

int main(void) {
  RUN(c9_tenant_ids_longer_than_256_bytes_are_refused);
  RUN(c9_reserved_names_control_characters_and_bad_utf8_are_invalid_tenants);
  RUN(c9_a_one_megabyte_tenant_id_leaves_prometheus_small);
  RUN(c9_a_256_byte_tenant_id_is_accepted);
  RUN(c9_a_global_dependency_ignores_the_tenant);
  RUN(c9_a_profile_over_the_max_tenants_cap_is_a_config_error);
  RUN(c9_an_allocation_failure_building_a_bank_is_a_config_error);
  return bbt_summary();
}
