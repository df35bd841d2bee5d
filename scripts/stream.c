/* A STREAM-style triad a[i] = b[i] + s*c[i], counted the STREAM way: 3 arrays x 8 bytes
 * per element, write-allocate excluded. Usage: stream_triad N_ELEMENTS [NTIMES]
 * Prints the median GB/s (1e9 B/s) over NTIMES timed repetitions (after one warm-up).
 * Build: cc -O3 -march=native -fopenmp scripts/stream_triad.c -o stream_triad */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s N_ELEMENTS [NTIMES]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    int ntimes = argc > 2 ? atoi(argv[2]) : 20;
    if (n <= 0 || ntimes <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    double *a = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    double *b = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    double *c = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
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
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
        double dt = omp_get_wtime() - t0;
        if (k >= 0)
            t[k] = dt;
    }
    qsort(t, ntimes, sizeof(double), cmp);
    double med = ntimes % 2 ? t[ntimes / 2] : 0.5 * (t[ntimes / 2 - 1] + t[ntimes / 2]);
    double check = a[n / 2];
    printf("%.3f\n", 3.0 * sizeof(double) * n / med / 1e9);
    if (check != 2.0 + s * 0.5)
        fprintf(stderr, "triad check failed: %f\n", check);
    return 0;
}
