"""Eager PyTorch with nested NVTX ranges: two training-step-like iterations,
each `step` holding two `layer` ranges (a bf16 linear through cuBLAS, then a per-row
normalization chain of five eager kernels: mean, sub, norm, div, mul) and a `loss` range; one
range pushed with torch.cuda.nvtx.range_push/range_pop. Small sizes: it runs under ncu."""
import torch

torch.manual_seed(0)
dev = "cuda"
rng = torch.cuda.nvtx.range
W1 = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
W2 = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
x0 = torch.randn(4096, 1024, device=dev, dtype=torch.bfloat16)


def layer(name, x, w):
    with rng(name):
        with rng("linear"):
            h = (x @ w).float()                                   # cuBLAS bf16, cast to fp32
        with rng("norm"):
            m = h.mean(dim=1, keepdim=True)
            hc = h - m
            n = hc.norm(dim=1, keepdim=True)
            y = hc / n
            y = y * 2.0
        return y.bfloat16()


for it in range(2):
    with rng("step"):
        y = layer("layer1", x0, W1)
        y = layer("layer2", y, W2)
        torch.cuda.nvtx.range_push("loss")
        loss = (y.float() ** 2).mean()
        torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("nvtx_nested done", float(loss))
