/*
 * likwid-marker.h — LIKWID's marker header, for roofline: LIKWID-instrumented code builds
 * unchanged against roofline (put this directory on the include path, link libroofline).
 *
 * As in LIKWID's own header: with LIKWID_PERFMON defined (-DLIKWID_PERFMON) the
 * LIKWID_MARKER_* macros count, here through roofline's C ABI (roofline.h: INIT, START, STOP,
 * RESET, GET and CLOSE map to roofline_marker_*; THREADINIT, SWITCH and REGISTER have
 * nothing to do, since each thread opens its counters at its first START); without it they
 * expand to nothing, and the program needs no library at all.
 *
 * The GPU markers (LIKWID_NVMARKER_*) are always empty here: roofline counts GPU kernels
 * with `roofline gpu`, not through markers.
 */
#ifndef LIKWID_MARKER_H
#define LIKWID_MARKER_H

#ifdef LIKWID_PERFMON
#include "roofline.h"
#else
#define LIKWID_MARKER_INIT
#define LIKWID_MARKER_THREADINIT
#define LIKWID_MARKER_SWITCH
#define LIKWID_MARKER_REGISTER(regionTag)
#define LIKWID_MARKER_START(regionTag)
#define LIKWID_MARKER_STOP(regionTag)
#define LIKWID_MARKER_CLOSE
#define LIKWID_MARKER_GET(regionTag, nevents, events, time, count)
#define LIKWID_MARKER_RESET(regionTag)
#endif /* LIKWID_PERFMON */

#ifndef LIKWID_NVMARKER_INIT
#define LIKWID_NVMARKER_INIT
#define LIKWID_NVMARKER_THREADINIT
#define LIKWID_NVMARKER_SWITCH
#define LIKWID_NVMARKER_REGISTER(regionTag)
#define LIKWID_NVMARKER_START(regionTag)
#define LIKWID_NVMARKER_STOP(regionTag)
#define LIKWID_NVMARKER_CLOSE
#define LIKWID_NVMARKER_GET(regionTag, ngpus, nevents, events, time, count)
#define LIKWID_NVMARKER_RESET(regionTag)
#endif

#endif /* LIKWID_MARKER_H */
