/* LIKWID-instrumented code as LIKWID's users write it: only <likwid-marker.h> and the
 * LIKWID_MARKER_* macros. tests/c_abi.rs builds it with -DLIKWID_PERFMON (counted through
 * roofline) and without (every macro empty: it must build and link with no library).
 * Usage: likwid PAGES */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <likwid-marker.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Fresh anonymous pages, no huge pages: each write faults exactly once. */
static void touch(long n) {
    size_t len = (size_t)n * 4096;
    char *p = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(3); }
    madvise(p, len, MADV_NOHUGEPAGE);
    for (long i = 0; i < n; i++) p[i * 4096] = (char)(i + 1);
    munmap(p, len);
}

int main(int argc, char **argv) {
    long pages = argc > 1 ? atol(argv[1]) : 100;
    LIKWID_MARKER_INIT;
    LIKWID_MARKER_THREADINIT;
    LIKWID_MARKER_REGISTER("touch");
    for (int i = 0; i < 3; i++) {
        LIKWID_MARKER_START("touch");
        touch(pages);
        LIKWID_MARKER_STOP("touch");
    }
    /* Counted, then forgotten: RESET drops it from the totals. */
    LIKWID_MARKER_START("scratch");
    touch(1);
    LIKWID_MARKER_STOP("scratch");
    LIKWID_MARKER_RESET("scratch");
    LIKWID_MARKER_SWITCH;
    LIKWID_NVMARKER_INIT;
    LIKWID_NVMARKER_CLOSE;
#ifdef LIKWID_PERFMON
    int nevents = 16, count = 0;
    double events[16], time = 0;
    LIKWID_MARKER_GET("touch", &nevents, events, &time, &count);
    printf("touch count=%d nevents=%d time=%.9f\n", count, nevents, time);
#else
    printf("markers off\n");
#endif
    LIKWID_MARKER_CLOSE;
    return 0;
}
