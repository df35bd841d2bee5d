"""cuBLAS GEMM set through torch.matmul: bf16, fp16, tf32 (fp32 with TF32 allowed),
fp32 (no TF32), fp64, each in an NVTX range. `python3 gemms.py N REPS` runs each REPS times
(under ncu: 1); `python3 gemms.py N REPS time` also prints the median CUDA-event time and
TFLOP/s of each (unprofiled runs), 3 warm-ups first."""
import sys
import torch

n, reps = int(sys.argv[1]), int(sys.argv[2])
timed = len(sys.argv) > 3
torch.manual_seed(0)
cases = [("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
         ("tf32", torch.float32, True), ("fp32", torch.float32, False), ("fp64", torch.float64, False)]
for name, dt, tf32 in cases:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    A = torch.randn(n, n, device="cuda", dtype=dt)
    B = torch.randn(n, n, device="cuda", dtype=dt)
    if timed:
        for _ in range(3):
            A @ B
    ts = []
    with torch.cuda.nvtx.range(f"gemm_{name}"):
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); C = A @ B; e1.record()
            ts.append((e0, e1))
    torch.cuda.synchronize()
    if timed:
        ms = sorted(a.elapsed_time(b) for a, b in ts)[len(ts) // 2]
        print(f"gemm {name} n={n} reps={reps} median_ms={ms:.4f} tflops={2 * n**3 / ms / 1e9:.1f}")
    del A, B, C
