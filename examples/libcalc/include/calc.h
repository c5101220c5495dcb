/* libcalc: a tiny reverse-Polish calculator library (crossbuild's bundled example). */
#ifndef CALC_H
#define CALC_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CALC_OK = 0, CALC_SYNTAX, CALC_UNDERFLOW, CALC_OVERFLOW, CALC_DIV_ZERO } calc_status;

/* Evaluate a space-separated RPN expression such as "3 4 + 2 *" into *out. */
calc_status calc_eval(const char *expr, long *out);
const char *calc_strerror(calc_status status);
/* The machine the library was compiled for, e.g. "aarch64" (proves which binary ran). */
const char *calc_machine(void);

#ifdef __cplusplus
}
#endif
#endif
