/*
 * The smallest program that uses breakerbank: one breaker, one call.
 *
 *   cc hello.c $(pkg-config --cflags --libs breakerbank)
 */
#include <stdio.h>
#include <string.h>

#include "breakerbank.h"

static const char PROFILE[] =
    "dependencies:\n"
    "  greeter_client:\n"
    "    isolation: global\n"
    "    trip: {consecutive_failures: 5}\n"
    "    open_duration: 30s\n"
    "    half_open: {probe_budget: 1, success_threshold: 1}\n"
    "    fallback: {kind: error, code: GREETER_DOWN}\n"
    "    recovery_bound: 5m\n";

int main(void) {
  bb_bank *bank = NULL;
  uint32_t greeter = 0;
  bb_decision d;
  if (bb_bank_from_yaml(PROFILE, strlen(PROFILE), false, &bank) != BB_OK ||
      bb_dependency_id(bank, "greeter_client", strlen("greeter_client"), &greeter) != BB_OK ||
      bb_admit(bank, greeter, NULL, 0, 0, &d) != BB_OK) {
    char msg[256];
    size_t n = 0;
    if (bb_last_error(msg, sizeof msg, &n) != BB_OK) {
      strcpy(msg, "?");
    }
    fprintf(stderr, "hello: %s\n", msg);
    return 1;
  }
  if (d.admitted) {
    puts("hello, world");
    if (bb_record(bank, d.permit, BB_OUTCOME_SUCCESS) != BB_OK) {
      return 1;
    }
  }
  return bb_bank_free(bank) == BB_OK ? 0 : 1;
}
