/* Unit test of libcalc; exits non-zero on the first failure. */
#include <stdio.h>
#include <string.h>

#include "calc.h"

static int failures, passed;

static void expect(const char *expr, calc_status want_status, long want_value) {
    long value = 0;
    calc_status st = calc_eval(expr, &value);
    if (st != want_status || (st == CALC_OK && value != want_value)) {
        printf("FAIL: \"%s\" -> %s %ld, want %s %ld\n", expr, calc_strerror(st), value,
               calc_strerror(want_status), want_value);
        failures++;
    } else {
        passed++;
    }
}

int main(void) {
    expect("3 4 + 2 *", CALC_OK, 14);
    expect("10 -3 -", CALC_OK, 13);
    expect("7 2 /", CALC_OK, 3);
    expect("1 0 /", CALC_DIV_ZERO, 0);
    expect("1 +", CALC_UNDERFLOW, 0);
    expect("1 2 x", CALC_SYNTAX, 0);
    expect("", CALC_UNDERFLOW, 0);
    if (strcmp(calc_machine(), "unknown") == 0) {
        printf("FAIL: unknown machine\n");
        failures++;
    }
    printf("test_calc on %s: %d passed, %d failed\n", calc_machine(), passed, failures);
    return failures ? 1 : 0;
}
