"""Real programs under the trace backend on a many-core server, as a user runs them: a rayon
pool with every CPU, numpy's OpenBLAS and PyTorch with every CPU. Each traced run is checked
against what must hold, not against an earlier output:

  rayon_regions N CALLS   exit 0, the same checksum line from the traced run and from the native
                          run `measure` times after it, W(daxpy) = W(dot) = 2·N·CALLS
                          exactly (N and CALLS drawn per run; idle runs, then runs beside one
                          busy loop per CPU)
  omp_triad N REPS        (with --omp) an OpenMP team of 2 to every CPU, passive or active
                          waiting: exit 0, the traced run's output lines equal to the native
                          run's, W = 2·N·REPS exactly (tests/fixtures/trace/omp_triad.c)
  eigen_gemm N REPS       (with --eigen) Eigen's OpenMP GEMM, n a multiple of 24 up to 120,
                          2 to every CPU threads: W = REPS·(2n³ + 2n² + 3) exactly (the
                          fixture's header derives it); and n = 480, 960 on every CPU, where
                          Eigen blocks k: W − 3·REPS = REPS·(2n³ + 2n²·KB) for a whole number
                          of k-blocks KB in [1, n/8]
  numpy / torch a @ b     exit 0; W of the whole run within [2n³, 2n³·(1 + 2 %)]: the product
                          is 2n³ flops and nothing else in the program computes 2 % of that

python3 server-programs.py [--runs R] [--peer-runs P] [--seed S] [--omp OMP_TRIAD]
                           [--eigen EIGEN_GEMM] ROOFLINE RAYON_REGIONS
(R runs idle and R loaded of rayon and of each of --omp and --eigen, default 20; P runs of
each of numpy and torch, default 3)
Prints one line per run and a summary; exit status 1 if any check failed. Figures reported:
the traced run's wall time over the native run's (the slowdown a user sees).
"""
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time


def traced(roofline, argv, env=None, timeout=600):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        t0 = time.perf_counter()
        try:
            out = subprocess.run([roofline, "measure", "--backend", "trace", "-o", f.name, "--"] + argv,
                                 capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            out = subprocess.CompletedProcess(argv, -9, "", f"timed out after {timeout} s")
        wall = time.perf_counter() - t0
        doc = None
        if out.returncode == 0:
            try:
                doc = json.load(open(f.name))
            except ValueError:
                pass
        return out, doc, wall


def native(argv, env=None):
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    return out, time.perf_counter() - t0


def flops(doc, name=None):
    for p in doc["points"]:
        if name is None or p["name"] == name:
            return p["flops"]["total"]
    return None


@contextlib.contextmanager
def hogs(k):
    """k busy loops while the block runs (none for k = 0)."""
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(k)]
    try:
        yield
    finally:
        for h in procs:
            h.kill()


def main():
    args = sys.argv[1:]
    runs, peer_runs, seed = 20, 3, int(time.time())
    omp = eigen = None
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--runs":
            runs = int(args.pop(0))
        elif flag == "--peer-runs":
            peer_runs = int(args.pop(0))
        elif flag == "--seed":
            seed = int(args.pop(0))
        elif flag == "--omp":
            omp = args.pop(0)
        elif flag == "--eigen":
            eigen = args.pop(0)
    roofline, rayon = args
    rng = random.Random(seed)
    cpus = os.cpu_count()
    print(f"seed {seed}, {cpus} CPUs, {runs} rayon runs idle and {runs} loaded", flush=True)
    failed = []
    slow = {}

    for loaded in (False, True):
        with hogs(cpus if loaded else 0):
            for i in range(runs):
                n, calls = rng.randint(1_000, 400_000), rng.randint(1, 6)
                argv = [rayon, str(n), str(calls)]
                # The example needs a PMU or `measure` around it: its native run is the one
                # `measure` makes after the traced one.
                out, doc, wall = traced(roofline, argv)
                want = 2 * n * calls
                got = (flops(doc, "daxpy"), flops(doc, "dot")) if doc else (None, None)
                sums = [x for x in out.stdout.splitlines() if "checksum" in x]
                ok = (out.returncode == 0 and doc is not None and got == (want, want)
                      and len(sums) == 2 and sums[0] == sums[1] and sums[0].startswith(f"n {n} calls {calls} "))
                tag = "loaded" if loaded else "idle"
                print(f"rayon {tag} {i + 1}: n {n} calls {calls} rc {out.returncode} W {got} "
                      f"want {want} {'ok' if ok else 'FAILED'} ({wall:.2f} s)", flush=True)
                if not ok:
                    failed.append(f"rayon {tag} n {n} calls {calls}: rc {out.returncode} "
                                  f"{out.stderr.strip()[-400:]}")

    # OpenMP teams: the C triad and Eigen's GEMM. Each draw: (what, argv, env, check(W) -> bool).
    def omp_draw():
        n, reps, threads = rng.randint(5_000, 2_000_000), rng.randint(1, 4), rng.randint(2, cpus)
        policy = rng.choice(["passive", "active"])
        return (f"n {n} reps {reps} threads {threads} {policy}", [omp, str(n), str(reps)],
                {"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": policy},
                lambda w: w == 2 * n * reps, f"2·n·reps = {2 * n * reps}")

    def eigen_draw(i):
        reps = rng.randint(1, 3)
        if i % 4 == 3:
            # Large: Eigen blocks k; KB whole, in [1, n/8].
            n, threads = rng.choice([480, 960]), cpus

            def check(w):
                kb = (w - 3 * reps - reps * 2 * n**3) / (reps * 2 * n**2)
                return kb == int(kb) and 1 <= kb <= n / 8
            want = f"reps·(2n³ + 2n²·KB) + 3·reps, KB whole in [1, {n // 8}]"
        else:
            n, threads = 24 * rng.randint(1, 5), rng.randint(2, cpus)
            exact = reps * (2 * n**3 + 2 * n**2 + 3)

            def check(w):
                return w == exact
            want = str(exact)
        return (f"n {n} reps {reps} threads {threads}", [eigen, str(n), str(reps)],
                {"OMP_NUM_THREADS": str(threads)}, check, want)

    teams = []
    if omp:
        teams.append(("omp_triad", lambda i: omp_draw()))
    if eigen:
        teams.append(("eigen_gemm", eigen_draw))
    for name, draw in teams:
        for loaded in (False, True):
            with hogs(cpus if loaded else 0):
                for i in range(runs):
                    what, argv, extra, check, want = draw(i)
                    env = dict(os.environ, **extra)
                    nat, _ = native(argv, env=env)
                    out, doc, wall = traced(roofline, argv, env=env)
                    w = flops(doc) if doc else None
                    # `measure` prints the traced run's output, the native run's, then its summary.
                    lines = [x for x in out.stdout.splitlines() if x.strip()]
                    want_lines = [x for x in nat.stdout.splitlines() if x.strip()]
                    ok = (out.returncode == 0 and w is not None and check(int(w))
                          and lines[:2 * len(want_lines)] == want_lines * 2)
                    tag = "loaded" if loaded else "idle"
                    print(f"{name} {tag} {i + 1}: {what} rc {out.returncode} W {w} want {want} "
                          f"{'ok' if ok else 'FAILED'} ({wall:.2f} s)", flush=True)
                    if not ok:
                        failed.append(f"{name} {tag} {what}: rc {out.returncode} W {w} "
                                      f"out {lines[:4]} native {want_lines[:2]} {out.stderr.strip()[-400:]}")

    n = 1024
    peers = {
        "numpy": f"import numpy as np; a = np.random.rand({n}, {n}); b = np.random.rand({n}, {n}); c = a @ b",
        "torch": f"import torch; a = torch.rand({n}, {n}, dtype=torch.float64); b = a.clone(); c = a @ b",
    }
    for name, code in peers.items():
        probe = subprocess.run([sys.executable, "-c", code.split(";")[0]], capture_output=True)
        if probe.returncode != 0:
            print(f"{name}: not installed here, skipped", flush=True)
            continue
        for i in range(peer_runs):
            nat, nat_s = native([sys.executable, "-c", code])
            out, doc, wall = traced(roofline, [sys.executable, "-c", code], timeout=240)
            w = flops(doc) if doc else None
            ok = out.returncode == 0 and w is not None and 2 * n**3 <= w <= 2 * n**3 * 1.02
            print(f"{name} {i + 1}: rc {out.returncode} W {w} (2n³ = {2 * n**3}) "
                  f"{'ok' if ok else 'FAILED'}; traced {wall:.1f} s, native {nat_s:.2f} s, "
                  f"{wall / nat_s:.0f}x", flush=True)
            slow.setdefault(name, []).append(wall / nat_s)
            if not ok:
                failed.append(f"{name} {i + 1}: rc {out.returncode} W {w} {out.stderr.strip()[-400:]}")

    for name, s in slow.items():
        print(f"{name}: traced/native median {sorted(s)[len(s) // 2]:.0f}x")
    print(f"{len(failed)} failed" + "".join(f"\n  {f}" for f in failed))
    return 1 if failed else 0


sys.exit(main())
