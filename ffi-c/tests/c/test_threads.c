/*
 * breakerbank's C ABI under threads: the probe budget (C7) with 4+ threads
 * racing bb_admit/bb_record on one half-open partition, exactly-once
 * recording under racing copies of a permit (C13), and listeners (C16)
 * called off the admission path, never with a lock held.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "bbtest.h"

#define SEC 1000000000ull
#define THREADS 6
#define BUDGET 3

static const char PROFILE[] =
    "dependencies:\n"
    "  payments_client:\n"
    "    isolation: tenant\n"
    "    trip: {consecutive_failures: 1}\n"
    "    open_duration: 1s\n"
    "    half_open: {probe_budget: 3, success_threshold: 1000}\n"
    "    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}\n"
    "    recovery_bound: 5m\n"
    "  email_client:\n"
    "    isolation: global\n"
    "    trip: {consecutive_failures: 1}\n"
    "    open_duration: 1s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: degraded}\n"
    "    recovery_bound: 1m\n";

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- C7: racing probes ------------------------------------------------- */

struct race {
  bb_bank *bank;
  uint32_t dep;
  atomic_int in_flight;
  atomic_int max_in_flight;
  atomic_int admitted;
  atomic_int rejected_budget;
  atomic_int other_rejects;
  atomic_int errors;
  atomic_int go;
  int iterations;
};

static void *prober(void *arg) {
  struct race *r = arg;
  while (!atomic_load(&r->go)) {
  }
  for (int i = 0; i < r->iterations; i++) {
    bb_decision d;
    if (bb_admit(r->bank, r->dep, "acme", 4, 0, &d) != BB_OK) {
      atomic_fetch_add(&r->errors, 1);
      continue;
    }
    if (!d.admitted) {
      if (d.reason == BB_REASON_PROBE_BUDGET) {
        atomic_fetch_add(&r->rejected_budget, 1);
      } else {
        atomic_fetch_add(&r->other_rejects, 1);
      }
      sched_yield(); /* the fallback's work: let the holders run */
      continue;
    }
    if (!d.probe) {
      atomic_fetch_add(&r->errors, 1); /* the partition must stay half-open */
    }
    int now = atomic_fetch_add(&r->in_flight, 1) + 1;
    int seen = atomic_load(&r->max_in_flight);
    while (now > seen && !atomic_compare_exchange_weak(&r->max_in_flight, &seen, now)) {
    }
    atomic_fetch_add(&r->admitted, 1);
    for (volatile int spin = 0; spin < (i % 7) * 50; spin++) {
    }
    if (i % 64 == 0) {
      /* hold the slot while other threads run, so the budget really fills */
      struct timespec hold = {0, 50000};
      nanosleep(&hold, NULL);
    }
    /* leave before the slot is returned, so in_flight never undercounts */
    atomic_fetch_sub(&r->in_flight, 1);
    /* cancelled: returns the slot and keeps the breaker half-open; one in
       two hundred a success, which counts toward a threshold (1000) the
       threads never reach together (6 x 100) */
    bb_outcome o = (i % 200 == 0) ? BB_OUTCOME_SUCCESS : BB_OUTCOME_CANCELLED;
    if (bb_record(r->bank, d.permit, o) != BB_OK) {
      atomic_fetch_add(&r->errors, 1);
    }
    for (volatile int spin = 0; spin < (i % 5) * 100; spin++) {
    } /* work between calls: the slot is free meanwhile */
  }
  return NULL;
}

static void c7_racing_threads_never_exceed_probe_budget(void) {
  struct race r;
  memset(&r, 0, sizeof r);
  r.bank = bbt_bank(PROFILE, true);
  r.dep = bbt_dep(r.bank, "payments_client");
  r.iterations = 20000;
  CHECK(bbt_call(r.bank, r.dep, "acme", BB_OUTCOME_FAILURE));
  CHECK_OK(bb_clock_advance(r.bank, 1 * SEC));
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    CHECK(pthread_create(&t[i], NULL, prober, &r) == 0);
  }
  atomic_store(&r.go, 1);
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
  }
  printf("  probes admitted %d, budget rejects %d, max in flight %d (budget %d)\n",
         atomic_load(&r.admitted), atomic_load(&r.rejected_budget),
         atomic_load(&r.max_in_flight), BUDGET);
  CHECK(atomic_load(&r.errors) == 0);
  CHECK(atomic_load(&r.other_rejects) == 0);
  CHECK(atomic_load(&r.max_in_flight) <= BUDGET);
  CHECK(atomic_load(&r.admitted) > 0);
  CHECK(bbt_state(r.bank, r.dep, "acme") == BB_STATE_HALF_OPEN);
  /* every slot came back: exactly BUDGET probes can be taken now */
  bb_decision held[BUDGET];
  for (int i = 0; i < BUDGET; i++) {
    held[i] = bbt_admit(r.bank, r.dep, "acme");
    CHECK(held[i].admitted && held[i].probe);
  }
  CHECK(bbt_admit(r.bank, r.dep, "acme").reason == BB_REASON_PROBE_BUDGET);
  for (int i = 0; i < BUDGET; i++) {
    CHECK_OK(bb_record(r.bank, held[i].permit, BB_OUTCOME_CANCELLED));
  }
  bb_bank_free(r.bank);
}

/* ---- C13: racing copies of one permit ---------------------------------- */

struct dup {
  const bb_bank *bank;
  bb_permit permit;
  atomic_int ok;
  atomic_int rejected;
  atomic_int go;
};

static void *recorder(void *arg) {
  struct dup *d = arg;
  while (!atomic_load(&d->go)) {
  }
  bb_status s = bb_record(d->bank, d->permit, BB_OUTCOME_FAILURE);
  if (s == BB_OK) {
    atomic_fetch_add(&d->ok, 1);
  } else if (s == BB_ERR_INVALID_ARGUMENT) {
    atomic_fetch_add(&d->rejected, 1);
  }
  return NULL;
}

static void c13_racing_copies_of_a_permit_record_once(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  uint32_t dep = bbt_dep(bank, "payments_client");
  int rounds = 200, bad = 0;
  for (int round = 0; round < rounds; round++) {
    char tenant[32];
    snprintf(tenant, sizeof tenant, "t%d", round);
    struct dup d;
    memset(&d, 0, sizeof d);
    d.bank = bank;
    d.permit = bbt_admit(bank, dep, tenant).permit;
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
      pthread_create(&t[i], NULL, recorder, &d);
    }
    atomic_store(&d.go, 1);
    for (int i = 0; i < 4; i++) {
      pthread_join(t[i], NULL);
    }
    if (atomic_load(&d.ok) != 1 || atomic_load(&d.rejected) != 3) {
      bad++;
    }
  }
  CHECK(bad == 0);
  /* each tenant saw exactly one failure: one trip each, not four */
  CHECK(bbt_metric(bank, "failures_total", "payments_client", "t0", NULL) == 1);
  CHECK(bbt_metric(bank, "opened_total", "payments_client", "t7", NULL) == 1);
  bb_bank_free(bank);
}

/* ---- C16: listeners ---------------------------------------------------- */

struct seen {
  pthread_mutex_t mu;
  pthread_t admitting_thread;
  int events;
  int on_admitting_thread;
  int transitions_to_open;
  int resets;
  int forced;
  int stuck;
  int slow_ms;
  const bb_bank *bank;
  int reentrant_ok;
  int set_listener_refused;
};

static void on_event(void *user_data, const bb_event *e) {
  struct seen *s = user_data;
  /* calling back into the bank from a listener is fine (no lock is held) */
  bb_breaker_state st;
  bb_status rs = bb_state(s->bank, 0, "acme", 4, &st);
  bb_status ls = bb_set_listener((bb_bank *)s->bank, NULL, NULL);
  pthread_mutex_lock(&s->mu);
  s->events++;
  if (pthread_equal(pthread_self(), s->admitting_thread)) {
    s->on_admitting_thread++;
  }
  if (rs == BB_OK) {
    s->reentrant_ok++;
  }
  if (ls == BB_ERR_INVALID_ARGUMENT) {
    s->set_listener_refused++;
  }
  if (e->kind == BB_EVENT_TRANSITION && e->has_to && e->to == BB_STATE_OPEN &&
      e->dependency_len == strlen("payments_client") &&
      memcmp(e->dependency, "payments_client", e->dependency_len) == 0) {
    s->transitions_to_open++;
  }
  if (e->kind == BB_EVENT_RESET) {
    s->resets++;
  }
  if (e->kind == BB_EVENT_FORCED_OPEN) {
    s->forced++;
  }
  if (e->kind == BB_EVENT_STUCK) {
    s->stuck++;
  }
  int slow = s->slow_ms;
  pthread_mutex_unlock(&s->mu);
  if (slow > 0) {
    sleep_ms(slow);
  }
}

static int wait_for(struct seen *s, int *field, int want) {
  for (int i = 0; i < 400; i++) {
    pthread_mutex_lock(&s->mu);
    int v = *field;
    pthread_mutex_unlock(&s->mu);
    if (v >= want) {
      return v;
    }
    sleep_ms(5);
  }
  return -1;
}

static void c16_listener_runs_off_the_admission_path(void) {
  static struct seen s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  s.admitting_thread = pthread_self();
  bb_bank *bank = bbt_bank(PROFILE, true);
  s.bank = bank;
  uint32_t pay = bbt_dep(bank, "payments_client");
  CHECK_OK(bb_set_listener(bank, on_event, &s));

  CHECK(bbt_call(bank, pay, "acme", BB_OUTCOME_FAILURE)); /* trip: an event */
  CHECK(wait_for(&s, &s.transitions_to_open, 1) >= 1);
  CHECK_OK(bb_force_open(bank, pay, "globex", 6));
  CHECK_OK(bb_reset(bank, pay, "globex", 6));
  CHECK(wait_for(&s, &s.forced, 1) >= 1);
  CHECK(wait_for(&s, &s.resets, 1) >= 1);

  /* a slow listener never slows admission */
  pthread_mutex_lock(&s.mu);
  s.slow_ms = 300;
  pthread_mutex_unlock(&s.mu);
  uint64_t t0 = mono_ns();
  char tenant[32];
  for (int i = 0; i < 20; i++) { /* 20 trips: 20 events, 6 s of listener time */
    snprintf(tenant, sizeof tenant, "slow-%d", i);
    bbt_call(bank, pay, tenant, BB_OUTCOME_FAILURE);
  }
  uint64_t took = mono_ns() - t0;
  printf("  20 tripping calls with a 300 ms listener took %.3f ms\n", (double)took / 1e6);
  CHECK(took < 250ull * 1000000ull);

  pthread_mutex_lock(&s.mu);
  s.slow_ms = 0;
  CHECK(s.on_admitting_thread == 0);
  CHECK(s.reentrant_ok == s.events);
  CHECK(s.set_listener_refused == s.events);
  pthread_mutex_unlock(&s.mu);

  /* after clearing, no more calls; freeing waits for a running one */
  CHECK_OK(bb_set_listener(bank, NULL, NULL));
  pthread_mutex_lock(&s.mu);
  int before = s.events;
  pthread_mutex_unlock(&s.mu);
  CHECK(bbt_call(bank, pay, "after-clear", BB_OUTCOME_FAILURE));
  sleep_ms(50);
  pthread_mutex_lock(&s.mu);
  CHECK(s.events == before);
  pthread_mutex_unlock(&s.mu);
  CHECK_OK(bb_bank_free(bank));
  pthread_mutex_destroy(&s.mu);
}

static void c15_c16_stuck_is_announced_once(void) {
  static struct seen s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  bb_bank *bank = bbt_bank(PROFILE, true);
  s.bank = bank;
  uint32_t email = bbt_dep(bank, "email_client");
  CHECK_OK(bb_set_listener(bank, on_event, &s));
  CHECK(bbt_call(bank, email, NULL, BB_OUTCOME_FAILURE));
  CHECK_OK(bb_clock_advance(bank, 61 * SEC));
  /* stuck is noticed on activity or when metrics are read */
  bbt_admit(bank, email, NULL).admitted ? (void)0 : (void)0;
  CHECK(bbt_metric(bank, "stuck", "email_client", "global", NULL) == 1);
  CHECK(wait_for(&s, &s.stuck, 1) == 1);
  CHECK(bbt_metric(bank, "stuck", "email_client", "global", NULL) == 1);
  sleep_ms(50);
  pthread_mutex_lock(&s.mu);
  CHECK(s.stuck == 1);
  pthread_mutex_unlock(&s.mu);
  CHECK_OK(bb_bank_free(bank));
  pthread_mutex_destroy(&s.mu);
}

/* ---- per-thread last error --------------------------------------------- */

static void *other_thread_error(void *arg) {
  (void)arg;
  static char msg[256];
  size_t n = 99;
  if (bb_last_error(msg, sizeof msg, &n) != BB_OK || n != 0) {
    return (void *)1; /* a fresh thread has no error */
  }
  bb_bank *b = NULL;
  if (bb_bank_from_yaml("x: [", 4, true, &b) != BB_ERR_CONFIG) {
    return (void *)1;
  }
  return NULL;
}

static void last_error_is_per_thread(void) {
  bb_bank *bank = bbt_bank(PROFILE, true);
  CHECK_STATUS(bb_dependency_id(bank, "mine", 4, &(uint32_t){0}), BB_ERR_UNKNOWN_DEPENDENCY);
  pthread_t t;
  void *ret = (void *)1;
  pthread_create(&t, NULL, other_thread_error, NULL);
  pthread_join(t, &ret);
  CHECK(ret == NULL);
  CHECK(strstr(bbt_last_error(), "mine") != NULL); /* untouched by the other thread */
  bb_bank_free(bank);
}

int main(void) {
  RUN(c7_racing_threads_never_exceed_probe_budget);
  RUN(c13_racing_copies_of_a_permit_record_once);
  RUN(c16_listener_runs_off_the_admission_path);
  RUN(c15_c16_stuck_is_announced_once);
  RUN(last_error_is_per_thread);
  return bbt_summary();
}
