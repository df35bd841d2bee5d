/* McCalpin-STREAM-style kernels, counted the STREAM way (write-allocate excluded):
 *   copy  a[i] = b[i]          2 arrays x 8 bytes per element
 *   scale a[i] = s*b[i]        2 arrays
 *   add   a[i] = b[i] + c[i]   3 arrays
 *   triad a[i] = b[i] + s*c[i] 3 arrays
 * Usage: stream [copy|scale|add|triad] N_ELEMENTS [NTIMES]   (kernel omitted: triad)
 * Prints the median GB/s (1e9 B/s) over NTIMES timed repetitions (after one warm-up), and
 * checks the result. Ordinary stores (gcc emits no non-temporal stores for these loops),
 * OpenMP static schedule, first-touch initialisation by the same threads, like STREAM.
 * Build: cc -O3 -march=native -fopenmp scripts/stream.c -o stream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    int arg = 1;
    const char *kernel = "triad";
    if (argc > 1 && (argv[1][0] < '0' || argv[1][0] > '9')) {
        kernel = argv[1];
        arg = 2;
    }
    int k_id = !strcmp(kernel, "copy") ? 0 : !strcmp(kernel, "scale") ? 1 : !strcmp(kernel, "add") ? 2 : !strcmp(kernel, "triad") ? 3 : -1;
    if (k_id < 0 || argc <= arg) {
        fprintf(stderr, "usage: %s [copy|scale|add|triad] N_ELEMENTS [NTIMES]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[arg]);
    int ntimes = argc > arg + 1 ? atoi(argv[arg + 1]) : 20;
    if (n <= 0 || ntimes <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    size_t bytes = ((n * sizeof(double) + 63) / 64) * 64;
    double *restrict a = aligned_alloc(64, bytes);
    double *restrict b = aligned_alloc(64, bytes);
    double *restrict c = aligned_alloc(64, bytes);
    if (!a || !b || !c) {
        fprintf(stderr, "cannot allocate\n");
        return 2;
    }
    const double s = 3.0;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.5;
    }
    double *t = malloc(sizeof(double) * ntimes);
    for (int k = -1; k < ntimes; k++) {
        double t0 = omp_get_wtime();
        switch (k_id) {
        case 0:
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) a[i] = b[i];
            break;
        case 1:
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) a[i] = s * b[i];
            break;
        case 2:
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) a[i] = b[i] + c[i];
            break;
        default:
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        }
        double dt = omp_get_wtime() - t0;
        if (k >= 0)
            t[k] = dt;
    }
    qsort(t, ntimes, sizeof(double), cmp);
    double med = ntimes % 2 ? t[ntimes / 2] : 0.5 * (t[ntimes / 2 - 1] + t[ntimes / 2]);
    const double want[] = {2.0, s * 2.0, 2.0 + 0.5, 2.0 + s * 0.5};
    const int arrays[] = {2, 2, 3, 3};
    printf("%.3f\n", arrays[k_id] * sizeof(double) * (double)n / med / 1e9);
    if (a[n / 2] != want[k_id] || a[0] != want[k_id] || a[n - 1] != want[k_id]) {
        fprintf(stderr, "%s check failed: %f\n", kernel, a[n / 2]);
        return 1;
    }
    return 0;
}
