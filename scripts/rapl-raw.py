#!/usr/bin/env python3
"""Raw RAPL counts, without roofline: every energy event of perf's `power` PMU opened
system-wide (perf_event_open through ctypes) on the PMU's CPU, and the MSRs where
/dev/cpu/0/msr opens, read every STEP seconds for SECONDS idle, then SECONDS with every CPU
busy. Prints one `phase seconds domain count` line a reading, then per phase and domain the
number of changes and the joules. A counter that a hypervisor lists without feeding it shows
no change in either phase.

Usage: rapl-raw.py [SECONDS] [STEP]   (root, or perf_event_paranoid <= 0)
"""
import ctypes
import multiprocessing
import os
import struct
import sys
import time

PMU = "/sys/bus/event_source/devices/power"
MSRS = {"unit": 0x606, "pkg": 0x611, "ram": 0x619, "psys": 0x64D}


def pmu_events():
    """(name, type, config, scale) of each energy event the kernel lists."""
    if not os.path.isdir(PMU):
        return []
    typ = int(open(f"{PMU}/type").read())
    out = []
    for f in sorted(os.listdir(f"{PMU}/events")):
        if f.startswith("energy-") and "." not in f:
            spec = open(f"{PMU}/events/{f}").read().strip()
            config = int(spec.split("event=")[1].split(",")[0], 16)
            scale_file = f"{PMU}/events/{f}.scale"
            scale = float(open(scale_file).read()) if os.path.exists(scale_file) else 1.0
            out.append((f, typ, config, scale))
    return out


def perf_open(typ, config, cpu):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = struct.pack("IIQQQQQ", typ, 128, config, 0, 0, 0, 0).ljust(128, b"\0")
    buf = ctypes.create_string_buffer(attr, 128)
    # 298: perf_event_open on x86-64 (pid -1: every task; the CPU the PMU names).
    fd = libc.syscall(298, buf, ctypes.c_int(-1), ctypes.c_int(cpu), ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return fd


def msr_reader():
    try:
        fd = os.open("/dev/cpu/0/msr", os.O_RDONLY)
    except OSError as e:
        print(f"msr: /dev/cpu/0/msr: {e}")
        return []
    readers = []
    for name, reg in MSRS.items():
        try:
            os.pread(fd, 8, reg)
            readers.append((f"msr-{name}", lambda reg=reg: struct.unpack("Q", os.pread(fd, 8, reg))[0]))
        except OSError as e:
            print(f"msr: {name} ({reg:#x}): {e}")
    return readers


def busy(stop_at):
    x = 0
    while time.time() < stop_at:
        x += 1


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    step = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    cpu = int(open(f"{PMU}/cpumask").read().split(",")[0].split("-")[0]) if os.path.isdir(PMU) else 0
    readers = []
    for name, typ, config, scale in pmu_events():
        try:
            fd = perf_open(typ, config, cpu)
            readers.append((name, lambda fd=fd: struct.unpack("Q", os.read(fd, 8))[0]))
            print(f"perf: {name} type {typ} config {config:#x} scale {scale} opened on CPU {cpu}")
        except OSError as e:
            print(f"perf: {name}: perf_event_open refused: {e}")
    readers += msr_reader()
    if not readers:
        print("no counter could be read")
        return 1
    scales = {name: scale for name, _, _, scale in pmu_events()}
    for phase in ("idle", "busy"):
        workers = []
        if phase == "busy":
            stop_at = time.time() + seconds + 0.5
            workers = [multiprocessing.Process(target=busy, args=(stop_at,)) for _ in range(os.cpu_count() or 1)]
            for w in workers:
                w.start()
            time.sleep(0.2)
        t0 = time.time()
        first = {name: read() for name, read in readers}
        last = dict(first)
        changes = {name: 0 for name, _ in readers}
        while time.time() - t0 < seconds:
            time.sleep(step)
            for name, read in readers:
                v = read()
                print(f"{phase} {time.time() - t0:.3f} {name} {v}")
                changes[name] += v != last[name]
                last[name] = v
        for w in workers:
            w.join()
        span = time.time() - t0
        for name, _ in readers:
            delta = last[name] - first[name]
            joules = f", {delta * scales[name]:.3f} J, {delta * scales[name] / span:.2f} W" if name in scales else ""
            print(f"summary {phase}: {name}: {changes[name]} changes over {span:.2f} s, count {first[name]} -> {last[name]} (delta {delta}{joules})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
