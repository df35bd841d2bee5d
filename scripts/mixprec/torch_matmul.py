"""PyTorch CPU bf16 matmul (oneDNN) timing, for the suite's bf16_gemm beside it.

python3 torch_matmul.py N THREADS REPS: C = A @ B with A, B bf16 n x n (randn), after three
warm-up calls; prints one JSON line: median and best seconds and GFLOP/s (2 n^3 / T).
"""
import json
import sys
import time

import torch

n, threads, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
a = torch.randn(n, n).bfloat16()
b = torch.randn(n, n).bfloat16()
for _ in range(3):
    c = torch.matmul(a, b)
ts = []
for _ in range(reps):
    t0 = time.perf_counter()
    c = torch.matmul(a, b)
    ts.append(time.perf_counter() - t0)
ts.sort()
med = ts[len(ts) // 2]
print(json.dumps({
    "n": n, "threads": threads, "reps": reps, "median_s": med, "best_s": ts[0],
    "gflops_median": 2 * n**3 / med / 1e9, "gflops_best": 2 * n**3 / ts[0] / 1e9,
    "torch": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
    "out_dtype": str(c.dtype),
}))
