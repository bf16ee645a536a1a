/* The CHECK macro of the C kernel tests: count a failed condition and go on. */
#ifndef SK_TEST_CHECK_H
#define SK_TEST_CHECK_H
#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

#endif
