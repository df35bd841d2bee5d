"""The suite's GEMMs against PyTorch's CPU matmul, alternated finely: per trial one
`roofline run` (a child process, a fraction of a second) and the same product through
PyTorch in this process (imported once), in alternating order, so each trial's ratio is
taken within about a second. On a guest whose clock and neighbours move both sides by the
same factor, the per-trial ratio holds still where the absolute figures swing.

python3 peer_ratio.py [--trials T] [--json FILE] CASE...
CASE = KERNEL:VARIANT:N:THREADS[:ROOFLINE[,ROOFLINE...]] (default binary: ./roofline).
KERNEL: dgemm (torch float64 matmul), bf16_gemm (bf16 matmul, oneDNN), int8_gemm
(torch._int_mm, int8 x int8 -> int32, where this torch has it on the CPU). THREADS > 1 runs
`--split` (one problem shared by the team) and torch with as many threads. With several
binaries each trial runs every one of them (an old build beside a new one).

Prints per case and binary: the median ratio ours/torch over the trials, its spread
((Q3 - Q1) / median), min and max, and the median GFLOP/s (and spread) of each side.
dgemm cases also take, in every trial, the FMA peak loop (`roofline ceilings --figure peak`
at that thread count, a fifth of a second) and, where numpy imports, numpy's float64 matmul
(its OpenBLAS); they print each side's median share of the trial's peak loop, so "ours at
X % of peak" and "the libraries at Y %" come from the same seconds of a noisy host.
Set OMP_WAIT_POLICY=PASSIVE (the default here) so torch's idle threads do not spin while
the suite's team runs.
"""
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("KMP_BLOCKTIME", "0")
import torch  # noqa: E402


def quantile(v, q):
    s = sorted(v)
    x = q * (len(s) - 1)
    lo, hi = int(x), min(int(x) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


def spread(v):
    m = quantile(v, 0.5)
    return (quantile(v, 0.75) - quantile(v, 0.25)) / m if m else float("nan")


def torch_op(kernel, n):
    if kernel == "dgemm":
        a, b = torch.randn(n, n, dtype=torch.float64), torch.randn(n, n, dtype=torch.float64)
        return lambda: torch.matmul(a, b)
    if kernel == "bf16_gemm":
        a, b = torch.randn(n, n).bfloat16(), torch.randn(n, n).bfloat16()
        return lambda: torch.matmul(a, b)
    if kernel == "int8_gemm":
        a = torch.randint(-128, 127, (n, n), dtype=torch.int8)
        b = torch.randint(-128, 127, (n, n), dtype=torch.int8)
        torch._int_mm(a, b)  # raises where this torch has no CPU int8 matmul
        return lambda: torch._int_mm(a, b)
    raise SystemExit(f"peer_ratio: no torch peer for {kernel}")


def time_torch(op, n, reps=5):
    for _ in range(2):
        op()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        op()
        ts.append(time.perf_counter() - t0)
    return 2 * n**3 / quantile(ts, 0.5) / 1e9


def peak_loop(binary, threads):
    out = subprocess.run([binary, "ceilings", "--figure", "peak", "--threads", str(threads)],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"peer_ratio: {binary} ceilings --figure peak: {out.stderr.strip()[-300:]}")
    return float(out.stdout.split()[0])


def numpy_op(n, threads):
    # numpy's OpenBLAS reads its thread count once, at import.
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    try:
        import numpy
    except ImportError:
        return None
    a, b = numpy.random.rand(n, n), numpy.random.rand(n, n)
    return lambda: a @ b


def time_ours(binary, kernel, variant, n, threads):
    cmd = [binary, "run", kernel, "--variant", variant, "--size", str(n), "--threads", str(threads),
           "--repeat", "5", "--min-time", "0.1", "--no-verify", "--json"]
    if threads > 1 and kernel != "dgemm":
        cmd.append("--split")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"peer_ratio: {' '.join(cmd)}: {out.stderr.strip()[-300:]}")
    p = json.loads(out.stdout)["points"][0]
    # 2n³ over the median time: int8's operations are integer ops, not flops (its `gflops`
    # field is 0), and every kernel here does 2n³ of them at these orders.
    return 2 * n**3 / p["seconds"] / 1e9, p["threads"]


def main():
    args = sys.argv[1:]
    trials, json_out = 5, None
    cases = []
    while args:
        a = args.pop(0)
        if a == "--trials":
            trials = int(args.pop(0))
        elif a == "--json":
            json_out = args.pop(0)
        else:
            cases.append(a)
    results = []
    for case in cases:
        parts = case.split(":")
        kernel, variant, n, threads = parts[0], parts[1], int(parts[2]), int(parts[3])
        binaries = parts[4].split(",") if len(parts) > 4 else ["./roofline"]
        torch.set_num_threads(threads)
        try:
            op = torch_op(kernel, n)
        except (RuntimeError, NotImplementedError) as e:
            print(f"{case}: no torch peer on this CPU ({str(e).splitlines()[0][:120]})", flush=True)
            continue
        ours = {b: [] for b in binaries}
        theirs, ratios = [], {b: [] for b in binaries}
        extra = {}
        if kernel == "dgemm":
            extra["peak"] = lambda: peak_loop(binaries[0], threads)
            np_op = numpy_op(n, threads)
            if np_op is not None:
                extra["numpy"] = lambda: time_torch(np_op, n)
        extras = {k: [] for k in extra}
        for t in range(trials):
            order = ["torch"] + binaries + list(extra)
            k = t % len(order)
            order = order[k:] + order[:k]
            got = {}
            for who in order:
                if who == "torch":
                    got[who] = time_torch(op, n)
                elif who in extra:
                    got[who] = extra[who]()
                else:
                    got[who], team = time_ours(who, kernel, variant, n, threads)
            theirs.append(got["torch"])
            for k in extra:
                extras[k].append(got[k])
            for b in binaries:
                ours[b].append(got[b])
                ratios[b].append(got[b] / got["torch"])
            print(f"  {case} trial {t + 1}: torch {got['torch']:.1f} " +
                  " ".join(f"{os.path.basename(b)} {got[b]:.1f} ({got[b] / got['torch']:.2f})" for b in binaries) +
                  "".join(f" {k} {got[k]:.1f}" for k in extra), flush=True)
        for b in binaries:
            r = ratios[b]
            row = {
                "case": case, "binary": b, "kernel": kernel, "variant": variant, "n": n, "threads": threads,
                "trials": trials, "ratios": r, "ratio_median": quantile(r, 0.5), "ratio_spread": spread(r),
                "ours_gflops": ours[b], "torch_gflops": theirs,
                "ours_median": quantile(ours[b], 0.5), "ours_spread": spread(ours[b]),
                "torch_median": quantile(theirs, 0.5), "torch_spread": spread(theirs),
            }
            if "peak" in extras:
                pk = extras["peak"]
                row["peak_gflops"] = pk
                row["ours_of_peak"] = quantile([o / q for o, q in zip(ours[b], pk)], 0.5)
                row["torch_of_peak"] = quantile([o / q for o, q in zip(theirs, pk)], 0.5)
                if "numpy" in extras:
                    row["numpy_gflops"] = extras["numpy"]
                    row["numpy_of_peak"] = quantile([o / q for o, q in zip(extras["numpy"], pk)], 0.5)
                    row["ours_over_numpy"] = quantile([o / q for o, q in zip(ours[b], extras["numpy"])], 0.5)
            results.append(row)
    print(f"{'case':<34} {'binary':<14} {'ratio':>6} {'spread':>7} {'min':>5} {'max':>5} "
          f"{'ours':>8} {'±':>6} {'torch':>8} {'±':>6}")
    for r in results:
        print(f"{r['kernel'] + ':' + r['variant'] + ':' + str(r['n']) + ':' + str(r['threads']):<34} "
              f"{os.path.basename(r['binary']):<14} {r['ratio_median']:>6.2f} {100 * r['ratio_spread']:>6.1f}% "
              f"{min(r['ratios']):>5.2f} {max(r['ratios']):>5.2f} {r['ours_median']:>8.1f} "
              f"{100 * r['ours_spread']:>5.1f}% {r['torch_median']:>8.1f} {100 * r['torch_spread']:>5.1f}%")
        if "ours_of_peak" in r:
            line = (f"  of the FMA peak loop taken beside each (median {quantile(r['peak_gflops'], 0.5):.1f}): "
                    f"ours {100 * r['ours_of_peak']:.1f} %, torch {100 * r['torch_of_peak']:.1f} %")
            if "numpy_of_peak" in r:
                line += (f", numpy (OpenBLAS) {100 * r['numpy_of_peak']:.1f} %; "
                         f"ours/numpy {r['ours_over_numpy']:.2f}")
            print(line)
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                       "results": results}, f, indent=1)


main()
