/*
 * A minimal check harness for the C SDK's and the C plugins' native unit
 * tests: CHECK(cond), CHECK_STR(got, want), `failures`/`checks` counters, and
 * check_summary(program), which prints the tally and returns main's status.
 */
#ifndef NODESTATUS_CHECK_H
#define NODESTATUS_CHECK_H

#include <stdio.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond)                                                                \
    do {                                                                           \
        checks++;                                                                  \
        if (!(cond)) {                                                             \
            failures++;                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                          \
    } while (0)

#define CHECK_STR(got, want)                                                              \
    do {                                                                                  \
        const char *g_ = (got), *w_ = (want);                                             \
        checks++;                                                                         \
        if (!g_ || strcmp(g_, w_) != 0) {                                                 \
            failures++;                                                                   \
            fprintf(stderr, "%s:%d: got \"%s\", want \"%s\"\n", __FILE__, __LINE__,       \
                    g_ ? g_ : "(null)", w_);                                              \
        }                                                                                 \
    } while (0)

/* Prints how many checks passed, or failed, as `program`; returns the exit
 * status for main: 0 when none failed, else 1. */
static inline int check_summary(const char *program) {
    if (failures) {
        fprintf(stderr, "%s: %d of %d checks FAILED\n", program, failures, checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", program, checks);
    return 0;
}

#endif
