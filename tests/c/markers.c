/* A LIKWID-instrumented program, built against include/roofline.h with the LIKWID
 * compatibility macros: two threads touch pages in region "touch", the main thread runs
 * region "idle" three times. It checks what it can itself and prints the totals for
 * tests/c_abi.rs to check. Usage: markers PAGES */
#define _GNU_SOURCE
#define ROOFLINE_LIKWID_COMPAT
#include "roofline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static long pages;

/* Fresh anonymous pages, no huge pages: each write faults exactly once. */
static void touch(long n) {
    size_t len = (size_t)n * 4096;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(3); }
    madvise(p, len, MADV_NOHUGEPAGE);
    for (long i = 0; i < n; i++) p[i * 4096] = (char)(i + 1);
    munmap(p, len);
}

static void *worker(void *arg) {
    (void)arg;
    LIKWID_MARKER_THREADINIT;
    if (LIKWID_MARKER_START("touch") != 0) exit(4);
    touch(pages);
    if (LIKWID_MARKER_STOP("touch") != 0) exit(5);
    return NULL;
}

static int find_event(const char *want) {
    char buf[64];
    int n = roofline_marker_event_count();
    for (int i = 0; i < n; i++) {
        if (roofline_marker_event_name(i, buf, sizeof buf) > 0 && strcmp(buf, want) == 0) return i;
    }
    return -1;
}

int main(int argc, char **argv) {
    pages = argc > 1 ? atol(argv[1]) : 100;
    if (LIKWID_MARKER_INIT != 0) { fprintf(stderr, "init failed\n"); return 6; }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++) {
        LIKWID_MARKER_START("idle");
        LIKWID_MARKER_STOP("idle");
    }
    /* Unbalanced and unknown regions are errors, not crashes. */
    if (roofline_marker_stop("never-started") != -1) return 7;
    int nev = 0, cnt = 0;
    double tm = 0;
    if (roofline_marker_get("no-such-region", &nev, NULL, &tm, &cnt) != -1) return 8;

    /* The pure markers are exported too. */
    roofline_region_begin("bare");
    roofline_region_end("bare");

    double ev[16];
    const char *regions[] = {"touch", "idle"};
    int faults = find_event("page-faults");
    for (int r = 0; r < 2; r++) {
        nev = 16;
        LIKWID_MARKER_GET(regions[r], &nev, ev, &tm, &cnt);
        printf("%s count=%d time=%.9f nevents=%d faults=%.0f\n", regions[r], cnt, tm, nev,
               faults >= 0 && faults < nev ? ev[faults] : -1.0);
    }
    LIKWID_MARKER_CLOSE;
    return 0;
}
