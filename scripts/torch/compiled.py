"""torch.compile of an elementwise/reduction chain: Inductor's Triton kernels (triton_poi_fused_*,
triton_per_fused_* / triton_red_fused_*) for tests/fixtures/ncu/torch_triton_*.csv."""
import torch

@torch.compile
def f(x, w):
    y = torch.nn.functional.gelu(x * w + 1.0)
    return y / y.norm(dim=1, keepdim=True)

x = torch.randn(4096, 1024, device="cuda")
w = torch.randn(1024, device="cuda")
for _ in range(2):
    r = f(x, w)
torch.cuda.synchronize()
print("compiled done", float(r.sum()))
