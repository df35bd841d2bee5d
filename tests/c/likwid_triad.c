/* The usual `likwid-perfctr -m` OpenMP pattern: every thread of the team starts and stops
 * the region itself, inside the parallel block, around its share of a work-shared loop.
 * Built against include/likwid-marker.h: with -DLIKWID_PERFMON the markers count through
 * roofline's C ABI; without it they are empty and the program needs no library (the same
 * program "with the regions removed", whose whole run must count the same W and core Q).
 *
 * Usage: likwid_triad N REPS [EXTRA [S]]
 *   N     elements per array (three arrays of doubles, stored once each by a serial
 *         initialisation loop outside any region: 24·N bytes of stores, N flops);
 *   REPS  repetitions of the triad a[i] = b[i] + s·c[i] (2 flops and 24 bytes per element);
 *   EXTRA when 1, the main thread begins the region one more time when it runs under a
 *         tracer (TracerPid in /proc/self/status): a real difference between the traced and
 *         the native run, which `roofline measure` must still report;
 *   S     the triad's scalar (3 when not given). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <likwid-marker.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int traced(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int pid = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "TracerPid:", 10) == 0) pid = atoi(line + 10);
    fclose(f);
    return pid != 0;
}

/* The work lives in functions of its own, compiled the same with markers or without (no
 * marker call can change how their loops are generated). */
__attribute__((noinline)) static void init(long n, double *a, double *b, double *c) {
    for (long i = 0; i < n; i++) { a[i] = 0.0; b[i] = (double)i; c[i] = 1.0 / (double)(i + 1); }
}

/* This thread's share of the triad (an orphaned work-shared loop, ending in a barrier). */
__attribute__((noinline)) static void triad(long n, double *a, const double *b, const double *c, double s) {
#pragma omp for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    long reps = argc > 2 ? atol(argv[2]) : 2;
    int extra = argc > 3 && atoi(argv[3]) == 1 && traced();
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) { perror("malloc"); return 3; }
    /* Outside every region: N divisions, 24·N bytes stored. */
    init(n, a, b, c);
    const double s = argc > 4 ? atof(argv[4]) : 3.0;
    LIKWID_MARKER_INIT;
#pragma omp parallel
    {
        LIKWID_MARKER_THREADINIT;
        LIKWID_MARKER_REGISTER("triad");
        for (long r = 0; r < reps; r++) {
            LIKWID_MARKER_START("triad");
            triad(n, a, b, c, s);
            LIKWID_MARKER_STOP("triad");
        }
    }
    if (extra) {
        /* Traced only: one more (empty) begin of the region on the main thread. */
        LIKWID_MARKER_START("triad");
        LIKWID_MARKER_STOP("triad");
    }
    LIKWID_MARKER_CLOSE;
    /* Some elements read back (integer sums: no flops), so the stores above stay. */
    long sum = 0;
    for (long i = 0; i < n; i += 4096) sum += (long)a[i];
    printf("triad n=%ld reps=%ld sum=%ld\n", n, reps, sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
