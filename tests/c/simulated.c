/* Regions of known work on the simulated PMU (ROOFLINE_BACKEND=simulated): region "axpy"
 * given as a function (roofline_marker_region, the form the simulated PMU counts), N
 * iterations of y[i] += a * x[i] in scalar double (2N flops); start/stop refused there.
 * Prints each event's total for tests/c_abi.rs. Usage: simulated N */
#include "roofline.h"

#include <stdio.h>
#include <stdlib.h>

struct axpy {
    long n;
    double a;
    const double *x;
    double *y;
};

/* No allocation, no lock: it also runs in the forked child the simulated PMU traces. */
static void axpy(void *arg) {
    struct axpy *w = arg;
    for (long i = 0; i < w->n; i++) w->y[i] += w->a * w->x[i];
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    if (!x || !y) return 3;
    for (long i = 0; i < n; i++) {
        x[i] = 1.0 + (double)i;
        y[i] = 2.0;
    }
    if (roofline_marker_init() != 0) return 6;
    struct axpy w = {n, 3.0, x, y};
    if (roofline_marker_region("axpy", axpy, &w) != 0) return 4;
    /* It ran here too, once: the traced call was the child's. */
    if (y[n - 1] != 2.0 + 3.0 * (double)n) return 5;
    /* begin/end alone cannot be traced in-process: refused, not counted as zero. */
    if (roofline_marker_start("manual") != -1) return 7;
    if (roofline_marker_region("null", NULL, NULL) != -1) return 8;

    double events[64];
    int nev = 64, count = 0;
    double time = 0;
    if (roofline_marker_get("axpy", &nev, events, &time, &count) != 0) return 9;
    printf("axpy count=%d nevents=%d\n", count, nev);
    char name[128];
    for (int i = 0; i < nev; i++) {
        if (roofline_marker_event_name(i, name, sizeof name) < 0) return 10;
        printf("event %s %.0f\n", name, events[i]);
    }
    free(x);
    free(y);
    return roofline_marker_close() == 0 ? 0 : 11;
}
