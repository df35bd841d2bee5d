/* Marker regions for `roofline measure --energy` (tests/energy_cli.rs): "outer" twice, each
 * holding "inner" three times (nested, repeated), then "blip" five times, shorter than a
 * counter update. The regions sleep: against a counter of known constant power their joules
 * are that power × their time. Usage: energy_regions [INNER_MICROSECONDS] */
#define _GNU_SOURCE
#define ROOFLINE_LIKWID_COMPAT
#include "roofline.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void nap(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    long us = argc > 1 ? atol(argv[1]) : 60000;
    if (LIKWID_MARKER_INIT != 0) {
        fprintf(stderr, "init failed\n");
        return 6;
    }
    for (int i = 0; i < 2; i++) {
        LIKWID_MARKER_START("outer");
        for (int j = 0; j < 3; j++) {
            LIKWID_MARKER_START("inner");
            nap(us);
            LIKWID_MARKER_STOP("inner");
        }
        nap(us / 3);
        LIKWID_MARKER_STOP("outer");
    }
    for (int k = 0; k < 5; k++) {
        LIKWID_MARKER_START("blip");
        nap(100);
        LIKWID_MARKER_STOP("blip");
    }
    LIKWID_MARKER_CLOSE;
    return 0;
}
