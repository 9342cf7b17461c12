/*
 * A tiny test harness for the C tests of breakerbank's ABI.
 *
 * Each test is a function; CHECK records a failure and carries on, so one
 * run reports every broken expectation. main() ends with bbt_summary(),
 * which prints "N passed, M failed" and returns the exit code.
 */
#ifndef BBTEST_H
#define BBTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakerbank.h"

static int bbt_passed;
static int bbt_failed;
static int bbt_test_failed;
static const char *bbt_current = "";

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "  FAIL %s:%d in %s: %s\n", __FILE__, __LINE__, bbt_current,   \
              #cond);                                                                \
      bbt_test_failed = 1;                                                           \
    }                                                                                \
  } while (0)

/* A status check that prints bb_last_error when it fails. */
#define CHECK_STATUS(call, want)                                                     \
  do {                                                                               \
    bb_status bbt_got_ = (call);                                                     \
    if (bbt_got_ != (bb_status)(want)) {                                             \
      char bbt_msg_[512];                                                            \
      size_t bbt_n_ = 0;                                                             \
      if (bb_last_error(bbt_msg_, sizeof bbt_msg_, &bbt_n_) != BB_OK) {              \
        strcpy(bbt_msg_, "(no message)");                                            \
      }                                                                              \
      fprintf(stderr, "  FAIL %s:%d in %s: %s returned %u, want %s (%s)\n",          \
              __FILE__, __LINE__, bbt_current, #call, (unsigned)bbt_got_, #want,     \
              bbt_msg_);                                                             \
      bbt_test_failed = 1;                                                           \
    }                                                                                \
  } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, BB_OK)

#define RUN(test)                                                                    \
  do {                                                                               \
    bbt_current = #test;                                                             \
    bbt_test_failed = 0;                                                             \
    test();                                                                          \
    if (bbt_test_failed) {                                                           \
      bbt_failed++;                                                                  \
      fprintf(stderr, "FAILED %s\n", #test);                                         \
    } else {                                                                         \
      bbt_passed++;                                                                  \
      printf("ok %s\n", #test);                                                      \
    }                                                                                \
  } while (0)

static inline int bbt_summary(void) {
  printf("%d passed, %d failed\n", bbt_passed, bbt_failed);
  return bbt_failed == 0 ? 0 : 1;
}

/* The calling thread's last error message (NUL-terminated, static buffer). */
static inline const char *bbt_last_error(void) {
  static char buf[1024];
  size_t n = 0;
  if (bb_last_error(buf, sizeof buf, &n) != BB_OK) {
    return "(bb_last_error failed)";
  }
  return buf;
}

/* A bank from a NUL-terminated YAML profile; aborts the run if it fails. */
static inline bb_bank *bbt_bank(const char *yaml, bool manual_clock) {
  bb_bank *bank = NULL;
  bb_status s = bb_bank_from_yaml(yaml, strlen(yaml), manual_clock, &bank);
  if (s != BB_OK || bank == NULL) {
    fprintf(stderr, "cannot build bank (%u): %s\n", (unsigned)s, bbt_last_error());
    exit(2);
  }
  return bank;
}

static inline uint32_t bbt_dep(const bb_bank *bank, const char *name) {
  uint32_t id = 0;
  if (bb_dependency_id(bank, name, strlen(name), &id) != BB_OK) {
    fprintf(stderr, "no dependency %s: %s\n", name, bbt_last_error());
    exit(2);
  }
  return id;
}

/* Admits (tenant may be NULL); aborts on a non-OK status. */
static inline bb_decision bbt_admit(const bb_bank *bank, uint32_t dep, const char *tenant) {
  bb_decision d;
  memset(&d, 0, sizeof d);
  bb_status s = bb_admit(bank, dep, tenant, tenant ? strlen(tenant) : 0, 0, &d);
  if (s != BB_OK) {
    fprintf(stderr, "bb_admit failed (%u): %s\n", (unsigned)s, bbt_last_error());
    exit(2);
  }
  return d;
}

static inline bb_breaker_state bbt_state(const bb_bank *bank, uint32_t dep, const char *tenant) {
  bb_breaker_state st = 99;
  bb_status s = bb_state(bank, dep, tenant, tenant ? strlen(tenant) : 0, &st);
  if (s != BB_OK) {
    fprintf(stderr, "bb_state failed (%u): %s\n", (unsigned)s, bbt_last_error());
    exit(2);
  }
  return st;
}

/* Admits and records `outcome` right away; returns whether it was admitted. */
static inline bool bbt_call(const bb_bank *bank, uint32_t dep, const char *tenant,
                            bb_outcome outcome) {
  bb_decision d = bbt_admit(bank, dep, tenant);
  if (!d.admitted) {
    return false;
  }
  bb_status s = bb_record(bank, d.permit, outcome);
  if (s != BB_OK) {
    fprintf(stderr, "bb_record failed (%u): %s\n", (unsigned)s, bbt_last_error());
    exit(2);
  }
  return true;
}

/* The Prometheus text of the bank (malloc'd, NUL-terminated). */
static inline char *bbt_prometheus(const bb_bank *bank) {
  size_t need = 0;
  bb_status s = bb_metrics_prometheus(bank, NULL, 0, &need);
  if (s != BB_OK && s != BB_ERR_BUFFER_TOO_SMALL) {
    fprintf(stderr, "bb_metrics_prometheus failed: %s\n", bbt_last_error());
    exit(2);
  }
  for (;;) {
    size_t cap = need + 4096;
    char *buf = malloc(cap);
    size_t n = 0;
    if (buf == NULL) {
      exit(2);
    }
    s = bb_metrics_prometheus(bank, buf, cap, &n);
    if (s == BB_OK) {
      return buf; /* cap > n, so it is NUL-terminated */
    }
    free(buf);
    if (s != BB_ERR_BUFFER_TOO_SMALL) {
      fprintf(stderr, "bb_metrics_prometheus failed: %s\n", bbt_last_error());
      exit(2);
    }
    need = n;
  }
}

/*
 * The value of metric `breakerbank_<name>` for (dependency, partition), or
 * -1 when there is no such line. Label order does not matter. For `state`,
 * pass the state label value in `state` (e.g. "open"), else NULL.
 */
static inline double bbt_metric(const bb_bank *bank, const char *name, const char *dep,
                                const char *partition, const char *state) {
  char *text = bbt_prometheus(bank);
  char metric[128], dep_label[256], part_label[256], state_label[64];
  double value = -1;
  snprintf(metric, sizeof metric, "breakerbank_%s{", name);
  snprintf(dep_label, sizeof dep_label, "dependency=\"%s\"", dep);
  snprintf(part_label, sizeof part_label, "partition=\"%s\"", partition);
  snprintf(state_label, sizeof state_label, "state=\"%s\"", state ? state : "");
  for (char *line = text; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) {
      *end = '\0';
    }
    if (strncmp(line, metric, strlen(metric)) == 0 && strstr(line, dep_label) &&
        strstr(line, part_label) && (state == NULL || strstr(line, state_label))) {
      char *close = strrchr(line, '}');
      if (close) {
        value = strtod(close + 1, NULL);
        break;
      }
    }
    line = end ? end + 1 : NULL;
  }
  free(text);
  return value;
}

#endif /* BBTEST_H */
