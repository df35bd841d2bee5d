"""bf16 GEMMs of order 8192 on every GPU torch sees, issued to all boards in turn (each
board's queue kept busy) for SECONDS, then one in-place add per board (the elementwise kernel
`gpu measure -k vectorized_elementwise` profiles): for `gpu measure --energy` on a host with
several GPUs (scripts/energy-device.sh). Prints each board's GEMM count and TFLOP/s.
Usage: python3 every_board.py [SECONDS]"""
import sys
import time
import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
n = 8192
boards = torch.cuda.device_count()
mats = [torch.randn(n, n, device=f"cuda:{d}", dtype=torch.bfloat16) for d in range(boards)]
for d in range(boards):
    torch.cuda.synchronize(d)
t0 = time.time()
done = [0] * boards
while time.time() - t0 < seconds:
    for _ in range(8):
        for d in range(boards):
            torch.matmul(mats[d], mats[d])
            done[d] += 1
    for d in range(boards):
        torch.cuda.synchronize(d)
span = time.time() - t0
for d in range(boards):
    mats[d].add_(1)
    torch.cuda.synchronize(d)
for d in range(boards):
    print(f"cuda:{d} {torch.cuda.get_device_name(d)}: {done[d]} GEMMs in {span:.2f} s, {2 * n**3 * done[d] / span / 1e12:.0f} TFLOP/s")
