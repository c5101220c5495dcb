#include "calc.h"

#include <ctype.h>
#include <stdlib.h>

#define STACK_MAX 64

calc_status calc_eval(const char *expr, long *out) {
    long stack[STACK_MAX];
    int depth = 0;
    const char *p = expr;
    while (*p) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        if (isdigit((unsigned char)*p) || (*p == '-' && isdigit((unsigned char)p[1]))) {
            char *end;
            long v = strtol(p, &end, 10);
            if (depth == STACK_MAX) return CALC_OVERFLOW;
            stack[depth++] = v;
            p = end;
            continue;
        }
        char op = *p++;
        if (*p && !isspace((unsigned char)*p)) return CALC_SYNTAX;
        if (depth < 2) return CALC_UNDERFLOW;
        long b = stack[--depth], a = stack[--depth], r;
        switch (op) {
        case '+': r = a + b; break;
        case '-': r = a - b; break;
        case '*': r = a * b; break;
        case '/':
            if (b == 0) return CALC_DIV_ZERO;
            r = a / b;
            break;
        default: return CALC_SYNTAX;
        }
        stack[depth++] = r;
    }
    if (depth != 1) return depth == 0 ? CALC_UNDERFLOW : CALC_SYNTAX;
    *out = stack[0];
    return CALC_OK;
}

const char *calc_strerror(calc_status status) {
    switch (status) {
    case CALC_OK: return "ok";
    case CALC_SYNTAX: return "syntax error";
    case CALC_UNDERFLOW: return "stack underflow";
    case CALC_OVERFLOW: return "stack overflow";
    case CALC_DIV_ZERO: return "division by zero";
    }
    return "unknown error";
}

const char *calc_machine(void) {
#if defined(__aarch64__)
    return "aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#elif defined(__arm__)
    return "arm";
#elif defined(__x86_64__)
    return "x86_64";
#elif defined(__wasm32__)
    return "wasm32";
#else
    return "unknown";
#endif
}
