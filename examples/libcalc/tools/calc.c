/* calc "3 4 + 2 *"  -> prints 14 */
#include <stdio.h>

#include "calc.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s \"RPN EXPRESSION\"\n", argv[0]);
        return 2;
    }
    long value;
    calc_status st = calc_eval(argv[1], &value);
    if (st != CALC_OK) {
        fprintf(stderr, "calc: %s\n", calc_strerror(st));
        return 1;
    }
    printf("%ld\n", value);
    return 0;
}
