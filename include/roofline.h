/*
 * roofline.h — mark regions of a C, C++ or Fortran program for `roofline`.
 *
 * Link with the library built by `cargo build --release` (target/release/libroofline.so
 * or libroofline.a; the static library also needs -lpthread -ldl -lm).
 *
 *   roofline_marker_init();
 *   roofline_marker_start("triad");  ... kernel ...  roofline_marker_stop("triad");
 *   roofline_marker_close();
 *
 * Each thread counts its own counters (opened on its first start); totals are merged per
 * region name over calls and threads. The backend comes from ROOFLINE_BACKEND:
 *   auto (default: perf with a hardware PMU, else trace when traced, else time only),
 *   perf, software (task-clock, page-faults, context-switches), trace, analytic (time only),
 *   simulated (the simulated PMU, a test instrument never chosen by auto: the platform table
 *   of ROOFLINE_PLATFORM, else CPUID's, faults from ROOFLINE_SIMULATED_PMU; it counts regions
 *   given as functions, roofline_marker_region, only: start/stop return -1 there).
 * roofline_marker_close() prints every region on stderr and, when ROOFLINE_OUTPUT names a
 * file, writes a roofline.report/1 JSON document there.
 *
 * With ROOFLINE_LIKWID_COMPAT or LIKWID_PERFMON defined, the LIKWID_MARKER_* macros map to
 * these functions, so LIKWID-instrumented code builds and runs unchanged (without likwid).
 * Code that includes <likwid-marker.h> gets them from include/likwid-marker.h.
 *
 * Strings passed in must be NUL-terminated and valid for the call. Every function is
 * thread-safe. Functions returning int return 0 on success and -1 on error (a one-line
 * reason is printed on stderr once).
 */
#ifndef ROOFLINE_H
#define ROOFLINE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pure markers: they count nothing. The trace backend breakpoints them; the name is the
 * first argument. roofline_marker_start/stop call them (begin last, end first). */
void roofline_region_begin(const char *name);
void roofline_region_end(const char *name);

int roofline_marker_init(void);
int roofline_marker_start(const char *name);
int roofline_marker_stop(const char *name);
int roofline_marker_reset(const char *name);
int roofline_marker_close(void);

/* A region given as a function: fn(arg) runs as region `name` (start, the call, stop), on
 * every backend. The only form the simulated PMU counts: there fn(arg) is first traced once
 * in a forked child (so fn must not allocate, lock or depend on other threads), then run
 * here for the time. */
int roofline_marker_region(const char *name, void (*fn)(void *), void *arg);

/* Number of counted events, and the name of event `index` (copied into buf of len bytes,
 * NUL-terminated, truncated; returns the full length or -1). */
int roofline_marker_event_count(void);
int roofline_marker_event_name(int index, char *buf, size_t len);

/* Totals of a region over all calls and threads. *nevents: capacity of `events` on input,
 * number filled on output (events in the order of roofline_marker_event_name). */
int roofline_marker_get(const char *name, int *nevents, double *events, double *time, int *count);

#ifdef __cplusplus
}
#endif

#endif /* ROOFLINE_H */

/* LIKWID's marker macros on the functions above. Outside the include guard on purpose: a
 * later #include (e.g. from likwid-marker.h once LIKWID_PERFMON is defined) still gets them;
 * never redefined when LIKWID's own header came first. */
#if (defined(ROOFLINE_LIKWID_COMPAT) || defined(LIKWID_PERFMON)) && !defined(LIKWID_MARKER_INIT)
#define LIKWID_MARKER_INIT roofline_marker_init()
#define LIKWID_MARKER_THREADINIT ((void)0)
#define LIKWID_MARKER_SWITCH ((void)0)
#define LIKWID_MARKER_REGISTER(regionTag) ((void)(regionTag))
#define LIKWID_MARKER_START(regionTag) roofline_marker_start(regionTag)
#define LIKWID_MARKER_STOP(regionTag) roofline_marker_stop(regionTag)
#define LIKWID_MARKER_RESET(regionTag) roofline_marker_reset(regionTag)
#define LIKWID_MARKER_GET(regionTag, nevents, events, time, count) \
    roofline_marker_get((regionTag), (nevents), (events), (time), (count))
#define LIKWID_MARKER_CLOSE roofline_marker_close()
#endif
