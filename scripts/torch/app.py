"""Eager PyTorch workload for tests/fixtures/ncu/torch_*.csv: templated ATen kernels
(elementwise, reduce, distribution, copy/cast, softmax), cuBLAS (bf16 GEMM), flash attention,
CUB (sort), each phase inside an NVTX range. Small sizes: it runs under ncu's replay."""
import torch

torch.manual_seed(0)
dev = "cuda"
rng = torch.cuda.nvtx.range

with rng("init"):
    x = torch.randn(4096, 1024, device=dev)                      # distribution kernel (normal)
    u = torch.rand(1 << 20, device=dev)                           # distribution kernel (uniform)
    b = torch.randn(1 << 22, device=dev, dtype=torch.float64)
    c = torch.randn(1 << 22, device=dev, dtype=torch.float64)
with rng("normalize"):                                            # per-row normalization chain
    m = x.mean(dim=1, keepdim=True)                               # reduce_kernel (MeanOps)
    xc = x - m                                                    # elementwise sub (broadcast)
    n = xc.norm(dim=1, keepdim=True)                              # reduce_kernel (NormTwoOps)
    y = xc / n                                                    # elementwise div
    y = y * 2.0                                                   # elementwise mul by scalar
with rng("triad"):                                                # FP64 triad a = b + s*c
    a = b + 3.0 * c                                               # MulFunctor<double>, then add
    a2 = torch.add(b, c, alpha=3.0)                               # one fused add-with-alpha
with rng("half"):
    h = y.half()                                                  # cast float -> half
    h = h * 3.0                                                   # MulFunctor<c10::Half>
    s = torch.softmax(h, dim=1)                                   # softmax
with rng("gemm"):
    A = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    B = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    C = A @ B                                                     # cuBLAS bf16
with rng("attention"):
    q = torch.randn(4, 16, 1024, 64, device=dev, dtype=torch.bfloat16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v)  # flash attention
with rng("sort"):
    sv, si = torch.sort(u)                                        # CUB radix sort
    cs = torch.cumsum(u, 0)                                       # CUB scan
torch.cuda.synchronize()
print("app done", float(y.sum()), float(a.sum()), float(C.float().sum()), float(o.float().sum()), float(sv[-1]))
