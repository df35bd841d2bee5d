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

#include "kernels.cu"

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
    } else if (!strcmp(k, "shared_stride")) {
        // n = the stride in 4-byte words (1: conflict-free, 32: 32-way bank conflicts);
        // 132 blocks of 256 threads, 1000 shared loads per thread.
        CK(cudaMalloc(&c.p[0], 132 * 256 * 4)); c.m = (int)n;
        ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; shared_stride<<<132, 256>>>((float*)c->p[0], 1000, c->m); }, &c);
    } else if (!strcmp(k, "two_kernels")) {
        // Two distinct kernels in one process, interleaved, for the critical-kernel ranking:
        // per iteration triad(n) twice and dgemm(m = 2048) once. W: triad 2n per launch,
        // dgemm 2m^3 per launch; with the warm-up, triad runs 2(L+1) times and dgemm L+1.
        for (int i = 0; i < 3; ++i) { CK(cudaMalloc(&c.p[i], n * 8)); fill((double*)c.p[i], n, 1 + i); }
        c.m = 2048; CK(cudaMalloc(&c.p[3], (size_t)3 * c.m * c.m * 8)); CK(cudaMemset(c.p[3], 0, (size_t)3 * c.m * c.m * 8));
        ms = time_launches(launches, +[](void* v) { Ctx* c = (Ctx*)v; double* g = (double*)c->p[3]; size_t mm = (size_t)c->m * c->m;
            dim3 gd((c->m + TS - 1) / TS, (c->m + TS - 1) / TS), bd(TS, TS);
            triad<<<(c->n + 255) / 256, 256>>>((double*)c->p[0], (double*)c->p[1], (double*)c->p[2], 3.0, c->n);
            dgemm<<<gd, bd>>>(g, g + mm, g + 2 * mm, c->m);
            triad<<<(c->n + 255) / 256, 256>>>((double*)c->p[0], (double*)c->p[1], (double*)c->p[2], 3.0, c->n); }, &c);
    } else { fprintf(stderr, "unknown kernel %s\n", k); return 2; }
    CK(cudaDeviceSynchronize());
    printf("%s %zu %d %.6f\n", k, n, launches, ms);
    return 0;
}
