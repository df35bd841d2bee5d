// One-core throughput of the mixed-precision units, for comparison with theoretical peaks:
// the clock (a dependent add chain, one add per cycle), AMX bf16/int8 (four independent
// 16x16 accumulators, full 16 x 64-byte tiles), AVX-512 FP16 FMA, vdpbf16ps and vpdpbusd
// (12 independent accumulators each). Prints ops per cycle and GHz.
// Build: gcc -O2 -march=sapphirerapids -static peaks.c
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

// The clock: a dependent chain of 3-cycle imuls (Golden Cove folds dependent add-immediate
// chains at rename, so an add chain runs faster than one per cycle).
static double ghz(void) {
    long n = 200000000;
    double t0 = now();
    __asm__ volatile("mov %0, %%rcx\nmov $3, %%rax\n1:\n"
                     "imul %%rax, %%rax\nimul %%rax, %%rax\nimul %%rax, %%rax\nimul %%rax, %%rax\n"
                     "sub $4, %%rcx\njnz 1b\n" ::"r"(n) : "rax", "rcx", "cc");
    return 3.0 * n / (now() - t0) / 1e9;
}

typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } tilecfg;
static char buf[8][1024] __attribute__((aligned(64)));

#define REP4(x) x x x x
int main(void) {
    double f = ghz();
    printf("clock_ghz %.3f\n", f);
    if (syscall(SYS_arch_prctl, 0x1023, 18) == 0) {
        tilecfg c = {0};
        c.palette = 1;
        for (int t = 0; t < 8; t++) { c.colsb[t] = 64; c.rows[t] = 16; }
        _tile_loadconfig(&c);
        for (int t = 0; t < 8; t++) memset(buf[t], 0, 1024);
        _tile_loadd(4, buf[4], 64); _tile_loadd(5, buf[5], 64); _tile_loadd(6, buf[6], 64); _tile_loadd(7, buf[7], 64);
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        long n = 2000000;
        for (int kind = 0; kind < 2; kind++) {
            double best = 0;
            for (int rep = 0; rep < 3; rep++) {
                double t0 = now();
                if (kind == 0)
                    for (long i = 0; i < n; i++) { _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); }
                else
                    for (long i = 0; i < n; i++) { _tile_dpbssd(0, 4, 6); _tile_dpbssd(1, 4, 7); _tile_dpbssd(2, 5, 6); _tile_dpbssd(3, 5, 7); }
                double dt = now() - t0;
                double ops = 4.0 * n * 16 * 16 * 16 * (kind == 0 ? 4 : 8);
                double g = ops / dt / 1e9;
                if (g > best) best = g;
            }
            printf("%s_gops %.1f per_cycle %.1f\n", kind == 0 ? "amx_bf16" : "amx_int8", best, best / f);
        }
        _tile_release();
    } else {
        printf("amx unavailable\n");
    }
    long n = 20000000;
    {
        __m512h b = _mm512_set1_ph((_Float16)0.999f), c = _mm512_set1_ph((_Float16)0.001f);
        __m512h a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
    a0 = _mm512_set1_ph((_Float16)(float)0);
    a1 = _mm512_set1_ph((_Float16)(float)1);
    a2 = _mm512_set1_ph((_Float16)(float)2);
    a3 = _mm512_set1_ph((_Float16)(float)3);
    a4 = _mm512_set1_ph((_Float16)(float)4);
    a5 = _mm512_set1_ph((_Float16)(float)5);
    a6 = _mm512_set1_ph((_Float16)(float)6);
    a7 = _mm512_set1_ph((_Float16)(float)7);
    a8 = _mm512_set1_ph((_Float16)(float)8);
    a9 = _mm512_set1_ph((_Float16)(float)9);
    a10 = _mm512_set1_ph((_Float16)(float)10);
    a11 = _mm512_set1_ph((_Float16)(float)11);
        double t0 = now();
        for (long i = 0; i < n; i++) { a0 = _mm512_fmadd_ph(a0, b, c); a1 = _mm512_fmadd_ph(a1, b, c); a2 = _mm512_fmadd_ph(a2, b, c); a3 = _mm512_fmadd_ph(a3, b, c); a4 = _mm512_fmadd_ph(a4, b, c); a5 = _mm512_fmadd_ph(a5, b, c); a6 = _mm512_fmadd_ph(a6, b, c); a7 = _mm512_fmadd_ph(a7, b, c); a8 = _mm512_fmadd_ph(a8, b, c); a9 = _mm512_fmadd_ph(a9, b, c); a10 = _mm512_fmadd_ph(a10, b, c); a11 = _mm512_fmadd_ph(a11, b, c); }
        double dt = now() - t0;
        __m512h s = a0;
    s = _mm512_add_ph(s, a1);
    s = _mm512_add_ph(s, a2);
    s = _mm512_add_ph(s, a3);
    s = _mm512_add_ph(s, a4);
    s = _mm512_add_ph(s, a5);
    s = _mm512_add_ph(s, a6);
    s = _mm512_add_ph(s, a7);
    s = _mm512_add_ph(s, a8);
    s = _mm512_add_ph(s, a9);
    s = _mm512_add_ph(s, a10);
    s = _mm512_add_ph(s, a11);
        double g = 12.0 * n * 64 / dt / 1e9;
        printf("fp16_fma512_gflops %.1f per_cycle %.1f (sink %f)\n", g, g / f, (float)s[0]);
    }
    {
        __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
        __m512 a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
    a0 = _mm512_set1_ps((float)0);
    a1 = _mm512_set1_ps((float)1);
    a2 = _mm512_set1_ps((float)2);
    a3 = _mm512_set1_ps((float)3);
    a4 = _mm512_set1_ps((float)4);
    a5 = _mm512_set1_ps((float)5);
    a6 = _mm512_set1_ps((float)6);
    a7 = _mm512_set1_ps((float)7);
    a8 = _mm512_set1_ps((float)8);
    a9 = _mm512_set1_ps((float)9);
    a10 = _mm512_set1_ps((float)10);
    a11 = _mm512_set1_ps((float)11);
        double t0 = now();
        for (long i = 0; i < n; i++) { a0 = _mm512_dpbf16_ps(a0, x, x); a1 = _mm512_dpbf16_ps(a1, x, x); a2 = _mm512_dpbf16_ps(a2, x, x); a3 = _mm512_dpbf16_ps(a3, x, x); a4 = _mm512_dpbf16_ps(a4, x, x); a5 = _mm512_dpbf16_ps(a5, x, x); a6 = _mm512_dpbf16_ps(a6, x, x); a7 = _mm512_dpbf16_ps(a7, x, x); a8 = _mm512_dpbf16_ps(a8, x, x); a9 = _mm512_dpbf16_ps(a9, x, x); a10 = _mm512_dpbf16_ps(a10, x, x); a11 = _mm512_dpbf16_ps(a11, x, x); }
        double dt = now() - t0;
        __m512 s = a0;
    s = _mm512_add_ps(s, a1);
    s = _mm512_add_ps(s, a2);
    s = _mm512_add_ps(s, a3);
    s = _mm512_add_ps(s, a4);
    s = _mm512_add_ps(s, a5);
    s = _mm512_add_ps(s, a6);
    s = _mm512_add_ps(s, a7);
    s = _mm512_add_ps(s, a8);
    s = _mm512_add_ps(s, a9);
    s = _mm512_add_ps(s, a10);
    s = _mm512_add_ps(s, a11);
        double g = 12.0 * n * 64 / dt / 1e9;
        printf("bf16_dot512_gflops %.1f per_cycle %.1f (sink %f)\n", g, g / f, s[0]);
    }
    {
        __m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(2);
        __m512i a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
    a0 = _mm512_set1_epi32(0);
    a1 = _mm512_set1_epi32(1);
    a2 = _mm512_set1_epi32(2);
    a3 = _mm512_set1_epi32(3);
    a4 = _mm512_set1_epi32(4);
    a5 = _mm512_set1_epi32(5);
    a6 = _mm512_set1_epi32(6);
    a7 = _mm512_set1_epi32(7);
    a8 = _mm512_set1_epi32(8);
    a9 = _mm512_set1_epi32(9);
    a10 = _mm512_set1_epi32(10);
    a11 = _mm512_set1_epi32(11);
        double t0 = now();
        for (long i = 0; i < n; i++) { a0 = _mm512_dpbusd_epi32(a0, x, y); a1 = _mm512_dpbusd_epi32(a1, x, y); a2 = _mm512_dpbusd_epi32(a2, x, y); a3 = _mm512_dpbusd_epi32(a3, x, y); a4 = _mm512_dpbusd_epi32(a4, x, y); a5 = _mm512_dpbusd_epi32(a5, x, y); a6 = _mm512_dpbusd_epi32(a6, x, y); a7 = _mm512_dpbusd_epi32(a7, x, y); a8 = _mm512_dpbusd_epi32(a8, x, y); a9 = _mm512_dpbusd_epi32(a9, x, y); a10 = _mm512_dpbusd_epi32(a10, x, y); a11 = _mm512_dpbusd_epi32(a11, x, y); }
        double dt = now() - t0;
        __m512i s = a0;
    s = _mm512_add_epi32(s, a1);
    s = _mm512_add_epi32(s, a2);
    s = _mm512_add_epi32(s, a3);
    s = _mm512_add_epi32(s, a4);
    s = _mm512_add_epi32(s, a5);
    s = _mm512_add_epi32(s, a6);
    s = _mm512_add_epi32(s, a7);
    s = _mm512_add_epi32(s, a8);
    s = _mm512_add_epi32(s, a9);
    s = _mm512_add_epi32(s, a10);
    s = _mm512_add_epi32(s, a11);
        double g = 12.0 * n * 128 / dt / 1e9;
        printf("vnni_int8_512_gops %.1f per_cycle %.1f (sink %d)\n", g, g / f, _mm512_reduce_add_epi32(s));
    }
    return 0;
}
