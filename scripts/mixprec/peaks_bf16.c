// Latency and throughput of AVX-512 BF16 vdpbf16ps zmm (and vpdpbusd zmm, for reference) on
// one core: loops of 1 to 24 independent accumulator chains; a unit rate-limited at T cycles per
// instruction with latency L reaches min(chains / L, 1 / T) instructions per cycle.
// Prints instructions per cycle and flops per cycle (vdpbf16ps zmm: 16 lanes x 4) at the clock
// of a dependent imul chain. (Hand-written asm
// loops below). Build: gcc -O2 -mavx512f -static peaks_bf16.c
#include <stdio.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

static double ghz(void) {
    long n = 200000000;
    double t0 = now();
    __asm__ volatile("mov %0, %%rcx\nmov $3, %%rax\n1:\n"
                     "imul %%rax, %%rax\nimul %%rax, %%rax\nimul %%rax, %%rax\nimul %%rax, %%rax\n"
                     "sub $4, %%rcx\njnz 1b\n" ::"r"(n) : "rax", "rcx", "cc");
    return 3.0 * n / (now() - t0) / 1e9;
}
static double vdpbf16ps_1(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0");
    return (double)n * 24 / (now() - t0);
}
static double vdpbf16ps_2(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1");
    return (double)n * 24 / (now() - t0);
}
static double vdpbf16ps_4(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3");
    return (double)n * 24 / (now() - t0);
}
static double vdpbf16ps_8(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7");
    return (double)n * 24 / (now() - t0);
}
static double vdpbf16ps_12(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm8\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm9\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm10\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm11\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm8\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm9\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm10\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm11\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11");
    return (double)n * 24 / (now() - t0);
}
static double vdpbf16ps_16(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm8\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm9\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm10\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm11\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm12\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm13\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm14\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm15\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15");
    return (double)n * 16 / (now() - t0);
}
static double vdpbf16ps_24(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vdpbf16ps %%zmm31, %%zmm30, %%zmm0\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm1\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm2\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm3\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm4\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm5\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm6\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm7\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm8\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm9\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm10\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm11\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm12\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm13\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm14\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm15\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm16\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm17\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm18\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm19\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm20\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm21\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm22\n""vdpbf16ps %%zmm31, %%zmm30, %%zmm23\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "zmm22", "zmm23");
    return (double)n * 24 / (now() - t0);
}
static double vpdpbusd_1(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0");
    return (double)n * 24 / (now() - t0);
}
static double vpdpbusd_2(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1");
    return (double)n * 24 / (now() - t0);
}
static double vpdpbusd_4(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3");
    return (double)n * 24 / (now() - t0);
}
static double vpdpbusd_8(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7");
    return (double)n * 24 / (now() - t0);
}
static double vpdpbusd_12(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n""vpdpbusd %%zmm31, %%zmm30, %%zmm8\n""vpdpbusd %%zmm31, %%zmm30, %%zmm9\n""vpdpbusd %%zmm31, %%zmm30, %%zmm10\n""vpdpbusd %%zmm31, %%zmm30, %%zmm11\n""vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n""vpdpbusd %%zmm31, %%zmm30, %%zmm8\n""vpdpbusd %%zmm31, %%zmm30, %%zmm9\n""vpdpbusd %%zmm31, %%zmm30, %%zmm10\n""vpdpbusd %%zmm31, %%zmm30, %%zmm11\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11");
    return (double)n * 24 / (now() - t0);
}
static double vpdpbusd_16(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n""vpdpbusd %%zmm31, %%zmm30, %%zmm8\n""vpdpbusd %%zmm31, %%zmm30, %%zmm9\n""vpdpbusd %%zmm31, %%zmm30, %%zmm10\n""vpdpbusd %%zmm31, %%zmm30, %%zmm11\n""vpdpbusd %%zmm31, %%zmm30, %%zmm12\n""vpdpbusd %%zmm31, %%zmm30, %%zmm13\n""vpdpbusd %%zmm31, %%zmm30, %%zmm14\n""vpdpbusd %%zmm31, %%zmm30, %%zmm15\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15");
    return (double)n * 16 / (now() - t0);
}
static double vpdpbusd_24(long n) {
    double t0 = now();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\nvpxord %%zmm31, %%zmm31, %%zmm31\n"
                     "mov %0, %%rcx\n1:\n" "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n""vpdpbusd %%zmm31, %%zmm30, %%zmm1\n""vpdpbusd %%zmm31, %%zmm30, %%zmm2\n""vpdpbusd %%zmm31, %%zmm30, %%zmm3\n""vpdpbusd %%zmm31, %%zmm30, %%zmm4\n""vpdpbusd %%zmm31, %%zmm30, %%zmm5\n""vpdpbusd %%zmm31, %%zmm30, %%zmm6\n""vpdpbusd %%zmm31, %%zmm30, %%zmm7\n""vpdpbusd %%zmm31, %%zmm30, %%zmm8\n""vpdpbusd %%zmm31, %%zmm30, %%zmm9\n""vpdpbusd %%zmm31, %%zmm30, %%zmm10\n""vpdpbusd %%zmm31, %%zmm30, %%zmm11\n""vpdpbusd %%zmm31, %%zmm30, %%zmm12\n""vpdpbusd %%zmm31, %%zmm30, %%zmm13\n""vpdpbusd %%zmm31, %%zmm30, %%zmm14\n""vpdpbusd %%zmm31, %%zmm30, %%zmm15\n""vpdpbusd %%zmm31, %%zmm30, %%zmm16\n""vpdpbusd %%zmm31, %%zmm30, %%zmm17\n""vpdpbusd %%zmm31, %%zmm30, %%zmm18\n""vpdpbusd %%zmm31, %%zmm30, %%zmm19\n""vpdpbusd %%zmm31, %%zmm30, %%zmm20\n""vpdpbusd %%zmm31, %%zmm30, %%zmm21\n""vpdpbusd %%zmm31, %%zmm30, %%zmm22\n""vpdpbusd %%zmm31, %%zmm30, %%zmm23\n" "dec %%rcx\njnz 1b\n" ::"r"(n) : "rcx", "cc", "zmm30", "zmm31", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "zmm22", "zmm23");
    return (double)n * 24 / (now() - t0);
}
int main(void) {
    double f = ghz() * 1e9;
    printf("clock_ghz %.3f\n", f / 1e9);
    long n = 4000000;
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_1(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 1, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_2(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 2, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_4(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 4, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_8(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 8, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_12(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 12, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_16(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 16, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vdpbf16ps_24(n); if (x > best) best = x; }
      printf("vdpbf16ps zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 24, best / f, best / f * 64); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_1(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 1, best / f, best / f * 128); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_2(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 2, best / f, best / f * 128); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_4(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 4, best / f, best / f * 128); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_8(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 8, best / f, best / f * 128); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_12(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 12, best / f, best / f * 128); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_16(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 16, best / f, best / f * 128); }
    { double best = 0; for (int r = 0; r < 3; r++) { double x = vpdpbusd_24(n); if (x > best) best = x; }
      printf("vpdpbusd zmm chains %2d: %.3f per cycle, %.1f ops per cycle\n", 24, best / f, best / f * 128); }
    return 0;
}
