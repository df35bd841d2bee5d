// roofline GPU kernel suite: the GPU counterparts of the CPU suite's comparable kernels,
// used for `roofline gpu run` and for the ncu fixture captures in tests/fixtures/ncu/.
// Each kernel's W and Q are known (see the comments) so ncu's counts can be checked.
//
// Build: nvcc -O3 -arch=sm_90 -o suite kernels/gpu/suite.cu
// Run:   ./suite KERNEL [N] [LAUNCHES]   (prints "name n launches median_ms" per kernel)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(2); } } while (0)

// triad: a[i] = b[i] + s*c[i]. W = 2n (one DFMA per element), Q_dram = 24n (16n read + 8n write).
__global__ void triad(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c, double s, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) a[i] = b[i] + s * c[i];
}

// daxpy: y[i] = a*x[i] + y[i]. W = 2n, Q_dram = 24n.
__global__ void daxpy(double a, const double* __restrict__ x, double* __restrict__ y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) y[i] = a * x[i] + y[i];
}

// Strided store (coalescing diagnostic): each thread writes one double STRIDE doubles apart,
// so each warp-level store touches 32 sectors instead of 8.
__global__ void strided_store(double* __restrict__ a, size_t n, int stride) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t j = (i * stride) % n;
    if (i < n) a[j] = (double)i;
}

// dgemm: C = A*B, n×n, shared-memory tiles of 32, each thread computes 2×2... kept simple:
// one output per thread, W = 2n^3 DFMA-flops.
#define TS 32
__global__ void dgemm(const double* __restrict__ A, const double* __restrict__ B, double* __restrict__ C, int n) {
    __shared__ double As[TS][TS];
    __shared__ double Bs[TS][TS + 1];
    int row = blockIdx.y * TS + threadIdx.y, col = blockIdx.x * TS + threadIdx.x;
    double acc = 0.0;
    for (int k0 = 0; k0 < n; k0 += TS) {
        As[threadIdx.y][threadIdx.x] = (row < n && k0 + threadIdx.x < n) ? A[(size_t)row * n + k0 + threadIdx.x] : 0.0;
        Bs[threadIdx.y][threadIdx.x] = (col < n && k0 + threadIdx.y < n) ? B[(size_t)(k0 + threadIdx.y) * n + col] : 0.0;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TS; ++k) acc = fma(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < n && col < n) C[(size_t)row * n + col] = acc;
}

// sgemm-like FP32 FMA throughput kernel: each thread runs ITER dependent-chain-free FMAs
// on 8 independent accumulators. W = 2 * 8 * ITER per thread.
__global__ void ffma_peak(float* out, int iters) {
    float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    const float m = 0.999f, c = 0.001f;
    for (int i = 0; i < iters; ++i) {
        a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
        a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// FP64 FMA throughput, same shape.
__global__ void dfma_peak(double* out, int iters) {
    double a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    const double m = 0.999, c = 0.001;
    for (int i = 0; i < iters; ++i) {
        a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
        a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// FP16 packed FMA (HFMA2) throughput.
__global__ void hfma2_peak(__half2* out, int iters) {
    __half2 a0 = __float2half2_rn(threadIdx.x * 1e-3f), a1 = __hadd2(a0, a0), a2 = __hadd2(a1, a0), a3 = __hadd2(a2, a0);
    const __half2 m = __float2half2_rn(0.999f), c = __float2half2_rn(0.001f);
    for (int i = 0; i < iters; ++i) {
        a0 = __hfma2(a0, m, c); a1 = __hfma2(a1, m, c); a2 = __hfma2(a2, m, c); a3 = __hfma2(a3, m, c);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = __hadd2(__hadd2(a0, a1), __hadd2(a2, a3));
}

// bf16 tensor-core GEMM through WMMA (16×16×16 tiles, fp32 accumulate): W = 2n^3 tensor flops.
using namespace nvcuda;
__global__ void bf16_wmma_gemm(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int n) {
    int warpM = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int warpN = blockIdx.y * blockDim.y + threadIdx.y;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < n; k += 16) {
        int ar = warpM * 16, bc = warpN * 16;
        if (ar < n && bc < n) {
            wmma::load_matrix_sync(a, A + (size_t)ar * n + k, n);
            wmma::load_matrix_sync(b, B + (size_t)bc * n + k, n);
            wmma::mma_sync(acc, a, b, acc);
        }
    }
    int cr = warpM * 16, cc = warpN * 16;
    if (cr < n && cc < n) wmma::store_matrix_sync(C + (size_t)cr * n + cc, acc, n, wmma::mem_row_major);
}

// Our own polynomial cosine (range reduction to [-pi, pi], even Taylor/minimax-style
// polynomial of degree 14): the same work on CPU and GPU, no libm dependence.
__device__ __forceinline__ double poly_cos(double x) {
    const double inv2pi = 0.15915494309189535, twopi = 6.283185307179586;
    double k = rint(x * inv2pi);
    double r = fma(-k, twopi, x);
    double r2 = r * r;
    double p = -1.1470745597729725e-11;
    p = fma(p, r2, 2.0876756987868100e-09);
    p = fma(p, r2, -2.7557319223985890e-07);
    p = fma(p, r2, 2.4801587301587300e-05);
    p = fma(p, r2, -1.3888888888888890e-03);
    p = fma(p, r2, 4.1666666666666664e-02);
    p = fma(p, r2, -0.5);
    return fma(p, r2, 1.0);
}
__global__ void cos_pass(const double* __restrict__ x, double* __restrict__ y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = poly_cos(x[i]);
}
__global__ void cos_cos_fused(const double* __restrict__ x, double* __restrict__ y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = poly_cos(poly_cos(x[i]));
}

// Per-row normalization of a batch (rows × cols): naive = one thread per row, 3 passes
// (mean, variance, normalize); warp = one warp per row, Welford + shuffles, double2 loads.
__global__ void normalize_naive(const double* __restrict__ x, double* __restrict__ y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const double* xr = x + (size_t)r * cols;
    double* yr = y + (size_t)r * cols;
    double s = 0;
    for (int j = 0; j < cols; ++j) s += xr[j];
    double mean = s / cols;
    double v = 0;
    for (int j = 0; j < cols; ++j) { double d = xr[j] - mean; v = fma(d, d, v); }
    double inv = rsqrt(v / cols + 1e-12);
    for (int j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * inv;
}
__global__ void normalize_warp(const double* __restrict__ x, double* __restrict__ y, int rows, int cols) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const double2* xr = reinterpret_cast<const double2*>(x + (size_t)warp * cols);
    double2* yr = reinterpret_cast<double2*>(y + (size_t)warp * cols);
    double n = 0, mean = 0, m2 = 0;
    for (int j = lane; j < cols / 2; j += 32) {
        double2 v = xr[j];
        n += 1; double d = v.x - mean; mean += d / n; m2 = fma(d, v.x - mean, m2);
        n += 1; d = v.y - mean; mean += d / n; m2 = fma(d, v.y - mean, m2);
    }
    for (int off = 16; off > 0; off /= 2) {
        double nb = __shfl_xor_sync(0xffffffff, n, off), mb = __shfl_xor_sync(0xffffffff, mean, off), m2b = __shfl_xor_sync(0xffffffff, m2, off);
        double nt = n + nb;
        if (nt > 0) { double d = mb - mean; mean += d * nb / nt; m2 += m2b + d * d * n * nb / nt; n = nt; }
    }
    double inv = rsqrt(m2 / cols + 1e-12);
    for (int j = lane; j < cols / 2; j += 32) {
        double2 v = xr[j];
        yr[j] = make_double2((v.x - mean) * inv, (v.y - mean) * inv);
    }
}

static float time_launches(int launches, void (*launch)(void*), void* ctx) {
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    std::vector<float> ms;
    launch(ctx); CK(cudaDeviceSynchronize());
    for (int i = 0; i < launches; ++i) {
        CK(cudaEventRecord(a)); launch(ctx); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        float t; CK(cudaEventElapsedTime(&t, a, b)); ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

struct Ctx { void* p[4]; size_t n; int m; };
static void fill(double* d, size_t n, unsigned seed) {
    std::vector<double> h(n); srand(seed);
    for (size_t i = 0; i < n; ++i) h[i] = (double)rand() / RAND_MAX - 0.5;
    CK(cudaMemcpy(d, h.data(), n * 8, cudaMemcpyHostToDevice));
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: suite KERNEL [N] [LAUNCHES]\n"); return 2; }
    const char* k = argv[1];
    size_t n = argc > 2 ? strtoull(argv[2], 0, 10) : (1u << 24);
    int launches = argc > 3 ? atoi(argv[3]) : 3;
    Ctx c{}; c.n = n;
    float ms = 0; const int B = 256;
    if (!strcmp(k, "triad") || !strcmp(k, "daxpy")) {
        for (int i = 0; i < 3; ++i) { CK(cudaMalloc(&c.p[i], n * 8)); fill((double*)c.p[i], n, 1 + i); }
        auto L = !strcmp(k, "triad")
            ? +[](void* v) { Ctx* c = (Ctx*)v; triad<<<(c->n + 255) / 256, 256>>>((double*)c->p[0], (double*)c->p[1], (double*)c->p[2], 3.0, c->n); }
            : +[](void* v) { Ctx* c = (Ctx*)v; daxpy<<<(c->n + 255) / 256, 256>>>(3.0, (double*)c->p[1], (double*)c->p[0], c->n); };
        ms = time_launches(launches, L, &c);
    } else if (!strcmp(k, "strided_store") || !strcmp(k, "unit_store")) {
        CK(cudaMalloc(&c.p[0], n * 8)); c.m = !strcmp(k, "unit_store") ? 1 : 33;
        ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; strided_store<<<(c->n + 255) / 256, 256>>>((double*)c->p[0], c->n, c->m); }, &c);
    } else if (!strcmp(k, "dgemm")) {
        for (int i = 0; i < 3; ++i) { CK(cudaMalloc(&c.p[i], n * n * 8)); fill((double*)c.p[i], n * n, 7 + i); }
        ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; dim3 g((c->n + TS - 1) / TS, (c->n + TS - 1) / TS), b(TS, TS);
            dgemm<<<g, b>>>((double*)c->p[0], (double*)c->p[1], (double*)c->p[2], (int)c->n); }, &c);
    } else if (!strcmp(k, "ffma_peak") || !strcmp(k, "dfma_peak") || !strcmp(k, "hfma2_peak")) {
        CK(cudaMalloc(&c.p[0], 132 * 8 * 1024 * 8)); c.m = (int)n;
        if (!strcmp(k, "ffma_peak")) ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; ffma_peak<<<132 * 8, 1024>>>((float*)c->p[0], c->m); }, &c);
        else if (!strcmp(k, "dfma_peak")) ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; dfma_peak<<<132 * 8, 1024>>>((double*)c->p[0], c->m); }, &c);
        else ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; hfma2_peak<<<132 * 8, 1024>>>((__half2*)c->p[0], c->m); }, &c);
    } else if (!strcmp(k, "bf16_gemm")) {
        CK(cudaMalloc(&c.p[0], n * n * 2)); CK(cudaMalloc(&c.p[1], n * n * 2)); CK(cudaMalloc(&c.p[2], n * n * 4));
        CK(cudaMemset(c.p[0], 0x3c, n * n * 2)); CK(cudaMemset(c.p[1], 0x3c, n * n * 2));
        ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; dim3 b(128, 4), g((c->n + 63) / 64, (c->n + 63) / 64);
            bf16_wmma_gemm<<<g, b>>>((__nv_bfloat16*)c->p[0], (__nv_bfloat16*)c->p[1], (float*)c->p[2], (int)c->n); }, &c);
    } else if (!strcmp(k, "cos_unfused") || !strcmp(k, "cos_fused")) {
        for (int i = 0; i < 3; ++i) { CK(cudaMalloc(&c.p[i], n * 8)); fill((double*)c.p[i], n, 3 + i); }
        if (!strcmp(k, "cos_fused")) ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; cos_cos_fused<<<(c->n + 255) / 256, 256>>>((double*)c->p[0], (double*)c->p[1], c->n); }, &c);
        else ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; cos_pass<<<(c->n + 255) / 256, 256>>>((double*)c->p[0], (double*)c->p[2], c->n);
            cos_pass<<<(c->n + 255) / 256, 256>>>((double*)c->p[2], (double*)c->p[1], c->n); }, &c);
    } else if (!strcmp(k, "normalize_naive") || !strcmp(k, "normalize_warp")) {
        int cols = 512; int rows = (int)(n / cols);
        for (int i = 0; i < 2; ++i) { CK(cudaMalloc(&c.p[i], (size_t)rows * cols * 8)); fill((double*)c.p[i], (size_t)rows * cols, 11 + i); }
        c.m = rows;
        if (!strcmp(k, "normalize_naive")) ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; normalize_naive<<<(c->m + 127) / 128, 128>>>((double*)c->p[0], (double*)c->p[1], c->m, 512); }, &c);
        else ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; normalize_warp<<<(c->m * 32 + 255) / 256, 256>>>((double*)c->p[0], (double*)c->p[1], c->m, 512); }, &c);
    } else { fprintf(stderr, "unknown kernel %s\n", k); return 2; }
    CK(cudaDeviceSynchronize());
    printf("%s %zu %d %.6f\n", k, n, launches, ms);
    return 0;
}
