//! SSE and AVX instructions against the CPU; the vector registers' seeding from the XSAVE
//! image.

use super::super::vector::{low_bits, writes_only_op0};
use super::*;
use crate::counters::trace::sys::XsaveLayout;
use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};

/// Registers around one vector instruction: ymm0–ymm3, rax (rdi points at `mem`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(32))]
struct VecState {
    y: [[u8; 32]; 4],
    /// 32-byte aligned (for the aligned moves).
    mem: [u8; 64],
    rax: u64,
}

/// Run `insn` natively with ymm0–3, rax and [rdi] from `s`; flags (ZF CF PF SF OF) come back.
macro_rules! native {
    ($insn:literal, $s:expr) => {{
        let mut s: VecState = $s;
        let mut rax = s.rax;
        let fl: u64;
        let y = s.y.as_mut_ptr();
        let mem = s.mem.as_mut_ptr();
        // SAFETY: the asm reads and writes only the 128 bytes of `s.y` and the 64 of
        // `s.mem` (through rdi), clobbers the registers it names, and balances its push/pop.
        unsafe {
            std::arch::asm!(
                "vmovdqu ymm0, [{y}]",
                "vmovdqu ymm1, [{y} + 32]",
                "vmovdqu ymm2, [{y} + 64]",
                "vmovdqu ymm3, [{y} + 96]",
                $insn,
                "pushfq",
                "pop {fl}",
                "vmovdqu [{y}], ymm0",
                "vmovdqu [{y} + 32], ymm1",
                "vmovdqu [{y} + 64], ymm2",
                "vmovdqu [{y} + 96], ymm3",
                y = in(reg) y,
                fl = out(reg) fl,
                inout("rax") rax,
                in("rdi") mem,
                out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            );
        }
        s.rax = rax;
        (s, fl)
    }};
}

fn mxcsr_now() -> u32 {
    let mut m = 0u32;
    // SAFETY: stmxcsr writes the 4 bytes of `m`.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut m, options(nostack)) };
    m
}

/// An emulator after `i` ran from `s` under `csr`, and the copy of `s.mem` its rdi points at
/// (kept alive while the emulator may read it).
fn emulator_after(i: iced_x86::Instruction, s: &VecState, csr: u32) -> (Emu, Box<VecState>) {
    let mut enc = iced_x86::Encoder::new(64);
    enc.encode(&i, 0x1000).unwrap();
    let bytes = enc.take_buffer();
    let mut d = Decoder::with_ip(64, &bytes, 0x1000, DecoderOptions::NONE);
    let insn = d.decode();
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut e = Emu::new(&regs, mem);
    // rdi points at a copy of the memory the native run used (the emulator reads this process).
    let buf = Box::new(*s);
    e.regs[0] = Some(s.rax);
    e.regs[7] = Some(buf.mem.as_ptr() as u64);
    for (n, y) in s.y.iter().enumerate() {
        e.vregs[n].val[..32].copy_from_slice(y);
        e.vregs[n].known = low_bits(32);
        e.vregs[n].fresh = 0;
    }
    e.mxcsr = Some(csr);
    e.mxcsr_fresh = false;
    e.step(&insn, &mut InstructionInfoFactory::new());
    (e, buf)
}

/// The same instruction through the emulator, from the same state; the result where known
/// (`None` for a register or memory byte it does not know) and its flags.
fn emulated(i: iced_x86::Instruction, s: &VecState) -> (Option<VecState>, Flags) {
    let (mut e, buf) = emulator_after(i, s, mxcsr_now());
    let mut out = *s;
    out.rax = match e.regs[0] {
        Some(v) => v,
        None => return (None, e.flags),
    };
    for n in 0..4 {
        match e.vread(Register::YMM0 + n as u32, 32) {
            Some(v) => out.y[n].copy_from_slice(&v[..32]),
            None => return (None, e.flags),
        }
    }
    match e.read_bytes(buf.mem.as_ptr() as u64, 64) {
        Some(m) => out.mem = m,
        None => return (None, e.flags),
    }
    std::hint::black_box(&buf);
    (Some(out), e.flags)
}

/// Random lanes with many equal bytes and words between registers (so compares see both).
fn vec_state(seed: &mut u64) -> VecState {
    let mut s = VecState {
        y: [[0; 32]; 4],
        rax: xorshift(seed),
        mem: [0; 64],
    };
    for b in s.mem.iter_mut() {
        *b = xorshift(seed) as u8;
    }
    for n in 0..4 {
        for k in 0..32 {
            let r = xorshift(seed);
            s.y[n][k] = match r % 5 {
                0 if n > 0 => s.y[0][k],
                1 => s.mem[k],
                2 => 0,
                _ => (r >> 8) as u8,
            };
        }
    }
    // Scalars worth comparing and converting in the low lanes of xmm0/xmm1 and the memory.
    let pool = |r: u64| -> u64 {
        match r % 10 {
            0 => f64::NAN.to_bits(),
            1 => 0x7ff0_0000_0000_0001,       // signalling NaN
            2 => (r >> 20) & ((1 << 52) - 1), // denormal (or zero)
            3 => (-0.0f64).to_bits(),
            4 => ((r >> 8) as i32 as f64).to_bits(),
            5 => (((r >> 8) % 1000) as f64 / 8.0 - 60.0).to_bits(),
            6 => (((r >> 8) as i64 as f64) * 3.0).to_bits(),
            7 => f64::INFINITY.to_bits(),
            _ => r,
        }
    };
    let (a, b) = (pool(xorshift(seed)), pool(xorshift(seed)));
    let b = if xorshift(seed).is_multiple_of(4) { a } else { b };
    s.y[0][..8].copy_from_slice(&a.to_le_bytes());
    s.y[1][..8].copy_from_slice(&b.to_le_bytes());
    s.mem[..8].copy_from_slice(&b.to_le_bytes());
    // The same for singles.
    let f = |r: u64| -> u32 {
        match r % 6 {
            0 => f32::NAN.to_bits(),
            1 => (r >> 40) as u32 & 0x7f_ffff,
            2 => ((r >> 8) as i16 as f32 / 4.0).to_bits(),
            3 => 0x7f80_0001,
            _ => r as u32,
        }
    };
    let (x, z) = (f(xorshift(seed)), f(xorshift(seed)));
    let z = if xorshift(seed).is_multiple_of(4) { x } else { z };
    s.y[2][..4].copy_from_slice(&x.to_le_bytes());
    s.y[3][..4].copy_from_slice(&z.to_le_bytes());
    s
}

/// The native run of one instruction's text from a state, and the flags after it.
type Native = fn(VecState) -> (VecState, u64);

/// The legacy SSE cases: the instruction for the emulator and the native run of the same text.
fn sse_cases() -> Vec<(I, Native)> {
    let m = || MemoryOperand::with_base(R::RDI);
    let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
    let (x0, x1, x2, x3) = (R::XMM0, R::XMM1, R::XMM2, R::XMM3);
    vec![
        (r2(C::Pcmpeqb_xmm_xmmm128, x0, x1), |s| native!("pcmpeqb xmm0, xmm1", s)),
        (r2(C::Pcmpeqw_xmm_xmmm128, x0, x1), |s| native!("pcmpeqw xmm0, xmm1", s)),
        (r2(C::Pcmpeqd_xmm_xmmm128, x0, x1), |s| native!("pcmpeqd xmm0, xmm1", s)),
        (r2(C::Pcmpeqq_xmm_xmmm128, x0, x1), |s| native!("pcmpeqq xmm0, xmm1", s)),
        (r2(C::Pcmpgtb_xmm_xmmm128, x0, x1), |s| native!("pcmpgtb xmm0, xmm1", s)),
        (r2(C::Pcmpgtw_xmm_xmmm128, x0, x1), |s| native!("pcmpgtw xmm0, xmm1", s)),
        (r2(C::Pcmpgtd_xmm_xmmm128, x0, x1), |s| native!("pcmpgtd xmm0, xmm1", s)),
        (r2(C::Pcmpgtq_xmm_xmmm128, x0, x1), |s| native!("pcmpgtq xmm0, xmm1", s)),
        (r2(C::Pminub_xmm_xmmm128, x0, x1), |s| native!("pminub xmm0, xmm1", s)),
        (r2(C::Pmaxub_xmm_xmmm128, x0, x1), |s| native!("pmaxub xmm0, xmm1", s)),
        (r2(C::Pminuw_xmm_xmmm128, x0, x1), |s| native!("pminuw xmm0, xmm1", s)),
        (r2(C::Pmaxud_xmm_xmmm128, x0, x1), |s| native!("pmaxud xmm0, xmm1", s)),
        (r2(C::Pminsb_xmm_xmmm128, x0, x1), |s| native!("pminsb xmm0, xmm1", s)),
        (r2(C::Pminsw_xmm_xmmm128, x0, x1), |s| native!("pminsw xmm0, xmm1", s)),
        (r2(C::Pmaxsd_xmm_xmmm128, x0, x1), |s| native!("pmaxsd xmm0, xmm1", s)),
        (r2(C::Paddb_xmm_xmmm128, x0, x1), |s| native!("paddb xmm0, xmm1", s)),
        (r2(C::Paddq_xmm_xmmm128, x0, x1), |s| native!("paddq xmm0, xmm1", s)),
        (r2(C::Psubw_xmm_xmmm128, x0, x1), |s| native!("psubw xmm0, xmm1", s)),
        (r2(C::Psubd_xmm_xmmm128, x0, x1), |s| native!("psubd xmm0, xmm1", s)),
        (r2(C::Pand_xmm_xmmm128, x0, x1), |s| native!("pand xmm0, xmm1", s)),
        (r2(C::Pandn_xmm_xmmm128, x0, x1), |s| native!("pandn xmm0, xmm1", s)),
        (r2(C::Por_xmm_xmmm128, x0, x1), |s| native!("por xmm0, xmm1", s)),
        (r2(C::Pxor_xmm_xmmm128, x0, x1), |s| native!("pxor xmm0, xmm1", s)),
        (r2(C::Andnpd_xmm_xmmm128, x0, x1), |s| native!("andnpd xmm0, xmm1", s)),
        (r2(C::Xorps_xmm_xmmm128, x2, x2), |s| native!("xorps xmm2, xmm2", s)),
        (r2(C::Pcmpeqb_xmm_xmmm128, x3, x3), |s| native!("pcmpeqb xmm3, xmm3", s)),
        (I::with2(C::Pcmpeqb_xmm_xmmm128, x0, m()).unwrap(), |s| {
            native!("pcmpeqb xmm0, [rdi]", s)
        }),
        (I::with2(C::Pminub_xmm_xmmm128, x0, m()).unwrap(), |s| {
            native!("pminub xmm0, [rdi]", s)
        }),
        (r2(C::Pmovmskb_r32_xmm, R::EAX, x1), |s| native!("pmovmskb eax, xmm1", s)),
        (r2(C::Movmskps_r32_xmm, R::EAX, x1), |s| native!("movmskps eax, xmm1", s)),
        (r2(C::Movmskpd_r32_xmm, R::EAX, x1), |s| native!("movmskpd eax, xmm1", s)),
        (r2(C::Ptest_xmm_xmmm128, x0, x1), |s| native!("ptest xmm0, xmm1", s)),
        (r2(C::Ptest_xmm_xmmm128, x2, x3), |s| native!("ptest xmm2, xmm3", s)),
        (r2(C::Ucomisd_xmm_xmmm64, x0, x1), |s| native!("ucomisd xmm0, xmm1", s)),
        (r2(C::Comisd_xmm_xmmm64, x0, x1), |s| native!("comisd xmm0, xmm1", s)),
        (I::with2(C::Ucomisd_xmm_xmmm64, x0, m()).unwrap(), |s| {
            native!("ucomisd xmm0, [rdi]", s)
        }),
        (r2(C::Ucomiss_xmm_xmmm32, x2, x3), |s| native!("ucomiss xmm2, xmm3", s)),
        (r2(C::Comiss_xmm_xmmm32, x2, x3), |s| native!("comiss xmm2, xmm3", s)),
        (r2(C::Cvttsd2si_r64_xmmm64, R::RAX, x1), |s| native!("cvttsd2si rax, xmm1", s)),
        (r2(C::Cvttsd2si_r32_xmmm64, R::EAX, x0), |s| native!("cvttsd2si eax, xmm0", s)),
        (r2(C::Cvttss2si_r32_xmmm32, R::EAX, x2), |s| native!("cvttss2si eax, xmm2", s)),
        (r2(C::Cvttss2si_r64_xmmm32, R::RAX, x3), |s| native!("cvttss2si rax, xmm3", s)),
        (r2(C::Movd_xmm_rm32, x0, R::EAX), |s| native!("movd xmm0, eax", s)),
        (r2(C::Movq_xmm_rm64, x0, R::RAX), |s| native!("movq xmm0, rax", s)),
        (r2(C::Movd_rm32_xmm, R::EAX, x1), |s| native!("movd eax, xmm1", s)),
        (r2(C::Movq_rm64_xmm, R::RAX, x1), |s| native!("movq rax, xmm1", s)),
        (r2(C::Movq_xmm_xmmm64, x0, x1), |s| native!("movq xmm0, xmm1", s)),
        (I::with2(C::Movq_xmm_xmmm64, x0, m()).unwrap(), |s| native!("movq xmm0, [rdi]", s)),
        (I::with2(C::Movhpd_xmm_m64, x1, m()).unwrap(), |s| native!("movhpd xmm1, [rdi]", s)),
        (I::with2(C::Movlpd_xmm_m64, x1, m()).unwrap(), |s| native!("movlpd xmm1, [rdi]", s)),
        (I::with2(C::Movhps_xmm_m64, x2, m()).unwrap(), |s| native!("movhps xmm2, [rdi]", s)),
        (I::with2(C::Movlps_xmm_m64, x2, m()).unwrap(), |s| native!("movlps xmm2, [rdi]", s)),
        (I::with2(C::Movhpd_m64_xmm, m(), x1).unwrap(), |s| native!("movhpd [rdi], xmm1", s)),
        (I::with2(C::Movlps_m64_xmm, m(), x2).unwrap(), |s| native!("movlps [rdi], xmm2", s)),
        (I::with2(C::Pslldq_xmm_imm8, x0, 5).unwrap(), |s| native!("pslldq xmm0, 5", s)),
        (I::with2(C::Psrldq_xmm_imm8, x0, 11).unwrap(), |s| native!("psrldq xmm0, 11", s)),
        (r2(C::Punpcklqdq_xmm_xmmm128, x0, x1), |s| native!("punpcklqdq xmm0, xmm1", s)),
        (r2(C::Punpckhqdq_xmm_xmmm128, x0, x1), |s| native!("punpckhqdq xmm0, xmm1", s)),
        (I::with2(C::Punpcklqdq_xmm_xmmm128, x2, m()).unwrap(), |s| {
            native!("punpcklqdq xmm2, [rdi]", s)
        }),
        (r2(C::Movss_xmm_xmmm32, x0, x1), |s| native!("movss xmm0, xmm1", s)),
        (r2(C::Movsd_xmm_xmmm64, x0, x1), |s| native!("movsd xmm0, xmm1", s)),
        (I::with2(C::Movsd_xmm_xmmm64, x0, m()).unwrap(), |s| native!("movsd xmm0, [rdi]", s)),
        (I::with2(C::Movss_xmm_xmmm32, x0, m()).unwrap(), |s| native!("movss xmm0, [rdi]", s)),
        (I::with2(C::Movdqu_xmm_xmmm128, x0, m()).unwrap(), |s| {
            native!("movdqu xmm0, [rdi]", s)
        }),
        (I::with2(C::Movdqa_xmm_xmmm128, x0, m()).unwrap(), |s| {
            native!("movdqa xmm0, [rdi]", s)
        }),
        (r2(C::Movups_xmm_xmmm128, x0, x1), |s| native!("movups xmm0, xmm1", s)),
        (I::with2(C::Movdqu_xmmm128_xmm, m(), x1).unwrap(), |s| {
            native!("movdqu [rdi], xmm1", s)
        }),
        (I::with2(C::Movq_xmmm64_xmm, m(), x1).unwrap(), |s| native!("movq [rdi], xmm1", s)),
        (I::with2(C::Movd_rm32_xmm, m(), x1).unwrap(), |s| native!("movd [rdi], xmm1", s)),
        (I::with2(C::Movsd_xmmm64_xmm, m(), x1).unwrap(), |s| native!("movsd [rdi], xmm1", s)),
        (I::with2(C::Movss_xmmm32_xmm, m(), x1).unwrap(), |s| native!("movss [rdi], xmm1", s)),
    ]
}

/// The VEX (AVX, AVX2) cases, as `sse_cases`.
fn avx_cases() -> Vec<(I, Native)> {
    let m = || MemoryOperand::with_base(R::RDI);
    let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
    let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
    let (x0, x1, x2) = (R::XMM0, R::XMM1, R::XMM2);
    let (y0, y1, y2) = (R::YMM0, R::YMM1, R::YMM2);
    vec![
        (r3(C::VEX_Vpcmpeqb_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpcmpeqb ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpcmpeqb_xmm_xmm_xmmm128, x0, x1, x2), |s| {
            native!("vpcmpeqb xmm0, xmm1, xmm2", s)
        }),
        (I::with3(C::VEX_Vpcmpeqb_ymm_ymm_ymmm256, y0, y1, m()).unwrap(), |s| {
            native!("vpcmpeqb ymm0, ymm1, [rdi]", s)
        }),
        (r3(C::VEX_Vpcmpgtd_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpcmpgtd ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpminub_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpminub ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpmaxsw_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpmaxsw ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpsubb_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpsubb ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpandn_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpandn ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpor_ymm_ymm_ymmm256, y0, y1, y2), |s| native!("vpor ymm0, ymm1, ymm2", s)),
        (r3(C::VEX_Vandps_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vandps ymm0, ymm1, ymm2", s)
        }),
        (r3(C::VEX_Vpxor_xmm_xmm_xmmm128, x2, x2, x2), |s| {
            native!("vpxor xmm2, xmm2, xmm2", s)
        }),
        (r3(C::VEX_Vpxor_ymm_ymm_ymmm256, y0, y1, y2), |s| {
            native!("vpxor ymm0, ymm1, ymm2", s)
        }),
        (r2(C::VEX_Vpmovmskb_r32_ymm, R::EAX, y1), |s| native!("vpmovmskb eax, ymm1", s)),
        (r2(C::VEX_Vmovmskps_r32_ymm, R::EAX, y1), |s| native!("vmovmskps eax, ymm1", s)),
        (r2(C::VEX_Vptest_ymm_ymmm256, y0, y1), |s| native!("vptest ymm0, ymm1", s)),
        (I::with2(C::VEX_Vmovdqu_ymm_ymmm256, y0, m()).unwrap(), |s| {
            native!("vmovdqu ymm0, [rdi]", s)
        }),
        (I::with2(C::VEX_Vmovdqu_ymmm256_ymm, m(), y1).unwrap(), |s| {
            native!("vmovdqu [rdi], ymm1", s)
        }),
        (I::with2(C::VEX_Vmovdqu_xmmm128_xmm, m(), x1).unwrap(), |s| {
            native!("vmovdqu [rdi], xmm1", s)
        }),
        (r2(C::VEX_Vmovd_xmm_rm32, x0, R::EAX), |s| native!("vmovd xmm0, eax", s)),
        (r2(C::VEX_Vmovq_xmm_rm64, x0, R::RAX), |s| native!("vmovq xmm0, rax", s)),
        (r3(C::VEX_Vmovsd_xmm_xmm_xmm, x0, x1, x2), |s| native!("vmovsd xmm0, xmm1, xmm2", s)),
        (I::with2(C::VEX_Vmovsd_xmm_m64, x0, m()).unwrap(), |s| {
            native!("vmovsd xmm0, [rdi]", s)
        }),
        (r2(C::VEX_Vpbroadcastb_ymm_xmmm8, y0, x1), |s| native!("vpbroadcastb ymm0, xmm1", s)),
        (I::with2(C::VEX_Vpbroadcastd_ymm_xmmm32, y0, m()).unwrap(), |s| {
            native!("vpbroadcastd ymm0, [rdi]", s)
        }),
        (I::with(C::VEX_Vzeroupper), |s| native!("vzeroupper", s)),
        (r2(C::VEX_Vucomisd_xmm_xmmm64, x0, x1), |s| native!("vucomisd xmm0, xmm1", s)),
        (r2(C::VEX_Vcvttsd2si_r64_xmmm64, R::RAX, x1), |s| native!("vcvttsd2si rax, xmm1", s)),
    ]
}

#[test]
fn vector_ops_match_the_cpu() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("sse4.2")) {
        eprintln!("skipped: needs AVX2 and SSE4.2");
        return;
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let cases = [sse_cases(), avx_cases()].concat();
    for (i, run) in &cases {
        for _ in 0..64 {
            let mut s = vec_state(&mut seed);
            let (want, fl) = run(s);
            let (got, flags) = emulated(*i, &s);
            // The emulator must know every result from known inputs, and agree.
            let got = got.unwrap_or_else(|| panic!("{i}: result unknown from {s:x?}"));
            assert_eq!(got, want, "{i} from {s:x?}");
            // The flags of those that set them: all five known and the CPU's.
            if i.rflags_modified() != 0 {
                for (f, bit) in [(flags.cf, 0), (flags.pf, 2), (flags.zf, 6), (flags.sf, 7), (flags.of, 11)] {
                    assert_eq!(f, Some(fl >> bit & 1 == 1), "{i} flag bit {bit} from {s:x?}");
                }
            }
            s.rax = 0;
        }
    }
}

#[test]
fn vectors_seeded_lazily_and_forgotten_exactly() {
    use iced_x86::{Code as C, Instruction as I, Register as R};
    let layout = XsaveLayout::of_this_cpu();
    let mut seed = 0x1234_5678_9abc_def1u64 ^ u64::from(std::process::id());
    // An XSAVE image with random xmm/ymm contents.
    let mut img = vec![0u8; layout.size];
    for b in img.iter_mut() {
        *b = xorshift(&mut seed) as u8;
    }
    img[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    // XSTATE_BV: x87, SSE, AVX and the AVX-512 components in use.
    img[512..520].copy_from_slice(&0xe7u64.to_le_bytes());
    let reads = Rc::new(std::cell::Cell::new(0));
    let r = reads.clone();
    let image = img.clone();
    let vs = VectorSeed::new(
        layout,
        Box::new(move || {
            r.set(r.get() + 1);
            Some(image.clone())
        }),
    );
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut e = Emu::new(&regs, mem.clone()).with_vectors(vs.clone());
    let mut f = InstructionInfoFactory::new();
    // A path that zeroes xmm15 and compares it with itself reads nothing from the image.
    e.step(
        &I::with3(C::VEX_Vpxor_xmm_xmm_xmmm128, R::XMM15, R::XMM15, R::XMM15).unwrap(),
        &mut f,
    );
    e.step(&I::with2(C::VEX_Vpmovmskb_r32_ymm, R::EAX, R::YMM15).unwrap(), &mut f);
    assert_eq!((e.regs[0], reads.get(), vs.was_read()), (Some(0), 0, false));
    // Reading xmm3 loads the image once, for every register.
    e.step(&I::with2(C::Pmovmskb_r32_xmm, R::ECX, R::XMM3).unwrap(), &mut f);
    e.step(&I::with2(C::Movq_rm64_xmm, R::RDX, R::XMM7).unwrap(), &mut f);
    let v = layout.vector(&img, 3);
    let want = (0..16).fold(0u64, |a, k| a | (u64::from(v[k] >> 7) << k));
    let x7 = u64::from_le_bytes(layout.vector(&img, 7)[..8].try_into().unwrap());
    assert_eq!((e.regs[1], e.regs[2], reads.get()), (Some(want), Some(x7), 1));
    // A second emulation of the same trap shares the image.
    let mut e2 = Emu::new(&regs, mem.clone()).with_vectors(vs.clone());
    e2.step(&I::with2(C::Movq_rm64_xmm, R::RDX, R::XMM7).unwrap(), &mut f);
    assert_eq!((e2.regs[2], reads.get()), (Some(x7), 1));
    // An instruction not modelled makes its destination unknown (pcmpistrm: xmm0,
    // implicitly), and so does anything after a system call.
    e.step(&I::with3(C::Pcmpistrm_xmm_xmmm128_imm8, R::XMM1, R::XMM2, 0x08).unwrap(), &mut f);
    e.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM0).unwrap(), &mut f);
    assert_eq!(e.regs[0], None);
    e.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM1).unwrap(), &mut f);
    assert!(e.regs[0].is_some());
    e.step(&I::with(C::Syscall), &mut f);
    e.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM1).unwrap(), &mut f);
    assert_eq!(e.regs[0], None);
    // With the AVX component in its initial state (XSTATE_BV bit 2 clear), the upper
    // halves are zero whatever the image's bytes.
    let mut init = img.clone();
    init[512..520].copy_from_slice(&0x3u64.to_le_bytes());
    let vs_init = VectorSeed::new(layout, Box::new(move || Some(init.clone())));
    let mut e4 = Emu::new(&regs, mem.clone()).with_vectors(vs_init);
    e4.step(&I::with2(C::VEX_Vpmovmskb_r32_ymm, R::ECX, R::YMM3).unwrap(), &mut f);
    if layout.ymm_hi != 0 {
        assert_eq!(e4.regs[1], Some(want));
    }
    // Without a seed, a vector value from before the path is unknown.
    let mut e3 = Emu::new(&regs, mem);
    e3.step(&I::with2(C::Movq_rm64_xmm, R::RAX, R::XMM1).unwrap(), &mut f);
    assert_eq!(e3.regs[0], None);
    // ucomisd on normal values needs no MXCSR; on a denormal it reads it (here: image's).
    assert_eq!(
        e3.fp_compare(1.0f64.to_bits(), 2.0f64.to_bits(), 8, false),
        Some(Some(std::cmp::Ordering::Less))
    );
    assert_eq!(e3.fp_compare(1, 2, 8, false), None);
}

#[test]
fn writes_only_op0_agrees_with_iced() {
    use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};
    let m = || MemoryOperand::with_base(R::RDI);
    let cases = [
        I::with3(C::VEX_Vfmadd231pd_ymm_ymm_ymmm256, R::YMM0, R::YMM1, R::YMM2).unwrap(),
        I::with3(C::VEX_Vfmadd231sd_xmm_xmm_xmmm64, R::XMM3, R::XMM1, m()).unwrap(),
        I::with2(C::VEX_Vbroadcastsd_ymm_m64, R::YMM4, m()).unwrap(),
        I::with2(C::Mulsd_xmm_xmmm64, R::XMM0, R::XMM1).unwrap(),
        I::with4(C::VEX_Vinsertf128_ymm_ymm_xmmm128_imm8, R::YMM0, R::YMM1, R::XMM2, 1).unwrap(),
        I::with3(C::VEX_Vmovhpd_xmm_xmm_m64, R::XMM0, R::XMM1, m()).unwrap(),
        I::with2(C::Cvtsi2sd_xmm_rm64, R::XMM5, R::RAX).unwrap(),
        I::with4(C::VEX_Vperm2f128_ymm_ymm_ymmm256_imm8, R::YMM0, R::YMM1, R::YMM2, 0x21).unwrap(),
        I::with3(C::Shufps_xmm_xmmm128_imm8, R::XMM1, R::XMM2, 0x1b).unwrap(),
        I::with3(C::VEX_Vaddpd_ymm_ymm_ymmm256, R::YMM7, R::YMM7, m()).unwrap(),
    ];
    let mut f = InstructionInfoFactory::new();
    for i in &cases {
        assert!(writes_only_op0(i), "{i}");
        let info = f.info(i);
        let w = |a: OpAccess| {
            matches!(
                a,
                OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
            )
        };
        let regs: Vec<Register> = info
            .used_registers()
            .iter()
            .filter(|u| w(u.access()))
            .map(|u| u.register())
            .collect();
        assert!(
            regs.iter().all(|r| r.number() == i.op0_register().number() && is_vec(*r)),
            "{i}: {regs:?}"
        );
        assert!(!info.used_memory().iter().any(|u| w(u.access())), "{i}");
        assert_eq!(i.rflags_modified(), 0, "{i}");
    }
}

#[test]
fn vector_stores_feed_later_integer_loads() {
    use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};
    let mut seed = 0x5151_7c7c_a0a0_3b3bu64 ^ u64::from(std::process::id());
    for _ in 0..50 {
        let mut s = vec_state(&mut seed);
        s.rax = 0;
        let off = (xorshift(&mut seed) % 24) as i64;
        let buf = Box::new([0u8; 64]);
        let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
        // SAFETY: user_regs_struct is plain integers.
        let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let mut e = Emu::new(&regs, mem);
        e.regs[7] = Some(buf.as_ptr() as u64);
        e.vregs[1].val[..32].copy_from_slice(&s.y[1]);
        e.vregs[1].known = low_bits(32);
        e.vregs[1].fresh = 0;
        let mut f = InstructionInfoFactory::new();
        // vmovdqu [rdi+off], ymm1; mov rax, [rdi+off+k]
        e.step(
            &I::with2(C::VEX_Vmovdqu_ymmm256_ymm, MemoryOperand::with_base_displ(R::RDI, off), R::YMM1).unwrap(),
            &mut f,
        );
        let k = (xorshift(&mut seed) % 25) as i64;
        e.step(
            &I::with2(C::Mov_r64_rm64, R::RAX, MemoryOperand::with_base_displ(R::RDI, off + k)).unwrap(),
            &mut f,
        );
        let want = u64::from_le_bytes(s.y[1][k as usize..k as usize + 8].try_into().unwrap());
        assert_eq!(e.regs[0], Some(want));
        std::hint::black_box(&buf);
    }
}

/// Random finite lanes of `e` bytes (4 or 8) in every register and the memory: normal numbers
/// over a wide range, zeros of both signs, denormals and numbers near overflow.
fn finite_state(seed: &mut u64, e: usize) -> VecState {
    let mut s = vec_state(seed);
    let value = |seed: &mut u64| -> u64 {
        let r = xorshift(seed);
        // One lane in four negative (square roots of negatives are NaN).
        let sign = if r.is_multiple_of(4) { -1.0 } else { 1.0 };
        let m = 1.0 + (r >> 12) as f64 / (1u64 << 52) as f64;
        let x = match (r >> 2) % 8 {
            0 => 0.0,
            1 => sign * m * 1e-310,
            2 if e == 8 => sign * m * 1e307,
            2 => sign * m * 1e38,
            _ => sign * m * 2f64.powi(((r >> 4) % 61) as i32 - 30),
        };
        if e == 8 { x.to_bits() } else { u64::from((x as f32).to_bits()) }
    };
    for y in s.y.iter_mut() {
        for k in 0..32 / e {
            let v = value(seed);
            y[k * e..k * e + e].copy_from_slice(&v.to_le_bytes()[..e]);
        }
    }
    for k in 0..64 / e {
        let v = value(seed);
        s.mem[k * e..k * e + e].copy_from_slice(&v.to_le_bytes()[..e]);
    }
    s
}

/// Whether any `e`-byte lane of `y` is a NaN.
fn has_nan(y: &[u8; 32], e: usize) -> bool {
    y.chunks(e).any(|l| {
        if e == 8 {
            f64::from_le_bytes(l.try_into().unwrap()).is_nan()
        } else {
            f32::from_le_bytes(l.try_into().unwrap()).is_nan()
        }
    })
}

/// Floating-point arithmetic cases (each writes ymm0/xmm0) and their element size.
fn arith_cases() -> Vec<(I, Native, usize)> {
    let m = || MemoryOperand::with_base(R::RDI);
    let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
    let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
    let (x0, x1, x2) = (R::XMM0, R::XMM1, R::XMM2);
    let (y0, y1, y2) = (R::YMM0, R::YMM1, R::YMM2);
    vec![
        (r2(C::Addsd_xmm_xmmm64, x0, x1), |s| native!("addsd xmm0, xmm1", s), 8),
        (r2(C::Subpd_xmm_xmmm128, x0, x1), |s| native!("subpd xmm0, xmm1", s), 8),
        (r2(C::Mulps_xmm_xmmm128, x0, x1), |s| native!("mulps xmm0, xmm1", s), 4),
        (r2(C::Divss_xmm_xmmm32, x0, x1), |s| native!("divss xmm0, xmm1", s), 4),
        (r2(C::Sqrtsd_xmm_xmmm64, x0, x1), |s| native!("sqrtsd xmm0, xmm1", s), 8),
        (r2(C::Minsd_xmm_xmmm64, x0, x1), |s| native!("minsd xmm0, xmm1", s), 8),
        (r2(C::Maxpd_xmm_xmmm128, x0, x1), |s| native!("maxpd xmm0, xmm1", s), 8),
        (
            I::with2(C::Addpd_xmm_xmmm128, x0, m()).unwrap(),
            |s| native!("addpd xmm0, [rdi]", s),
            8,
        ),
        (
            I::with2(C::Mulsd_xmm_xmmm64, x0, m()).unwrap(),
            |s| native!("mulsd xmm0, [rdi]", s),
            8,
        ),
        (
            r3(C::VEX_Vaddsd_xmm_xmm_xmmm64, x0, x1, x2),
            |s| native!("vaddsd xmm0, xmm1, xmm2", s),
            8,
        ),
        (
            r3(C::VEX_Vsubss_xmm_xmm_xmmm32, x0, x1, x2),
            |s| native!("vsubss xmm0, xmm1, xmm2", s),
            4,
        ),
        (
            r3(C::VEX_Vmulpd_ymm_ymm_ymmm256, y0, y1, y2),
            |s| native!("vmulpd ymm0, ymm1, ymm2", s),
            8,
        ),
        (
            I::with3(C::VEX_Vdivps_ymm_ymm_ymmm256, y0, y1, m()).unwrap(),
            |s| native!("vdivps ymm0, ymm1, [rdi]", s),
            4,
        ),
        (
            r3(C::VEX_Vsqrtsd_xmm_xmm_xmmm64, x0, x1, x2),
            |s| native!("vsqrtsd xmm0, xmm1, xmm2", s),
            8,
        ),
        (r2(C::VEX_Vsqrtpd_ymm_ymmm256, y0, y1), |s| native!("vsqrtpd ymm0, ymm1", s), 8),
        (
            r3(C::VEX_Vminsd_xmm_xmm_xmmm64, x0, x1, x2),
            |s| native!("vminsd xmm0, xmm1, xmm2", s),
            8,
        ),
        (
            r3(C::VEX_Vmaxps_ymm_ymm_ymmm256, y0, y1, y2),
            |s| native!("vmaxps ymm0, ymm1, ymm2", s),
            4,
        ),
        (
            r3(C::VEX_Vfmadd231sd_xmm_xmm_xmmm64, x0, x1, x2),
            |s| native!("vfmadd231sd xmm0, xmm1, xmm2", s),
            8,
        ),
        (
            r3(C::VEX_Vfmadd213pd_ymm_ymm_ymmm256, y0, y1, y2),
            |s| native!("vfmadd213pd ymm0, ymm1, ymm2", s),
            8,
        ),
        (
            I::with3(C::VEX_Vfnmadd132ps_ymm_ymm_ymmm256, y0, y1, m()).unwrap(),
            |s| native!("vfnmadd132ps ymm0, ymm1, [rdi]", s),
            4,
        ),
        (
            I::with3(C::VEX_Vfmsub231sd_xmm_xmm_xmmm64, x0, x1, m()).unwrap(),
            |s| native!("vfmsub231sd xmm0, xmm1, [rdi]", s),
            8,
        ),
        (
            r3(C::VEX_Vfnmsub213ss_xmm_xmm_xmmm32, x0, x1, x2),
            |s| native!("vfnmsub213ss xmm0, xmm1, xmm2", s),
            4,
        ),
    ]
}

#[test]
fn fp_arithmetic_matches_the_cpu_bit_for_bit() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        eprintln!("skipped: needs AVX2 and FMA");
        return;
    }
    assert_eq!(mxcsr_now() & 0xffc0, 0x1f80, "the test process runs under the start-up MXCSR");
    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
    for (i, run, e) in &arith_cases() {
        let mut known = 0;
        for draw in 0..400 {
            // Finite inputs first; then the NaN-, infinity- and denormal-rich states.
            let s = if draw < 300 {
                finite_state(&mut seed, *e)
            } else {
                vec_state(&mut seed)
            };
            let (want, _) = run(s);
            match emulated(*i, &s).0 {
                Some(got) => {
                    assert_eq!(got, want, "{i} from {s:x?}");
                    known += 1;
                }
                // Unknown only where the CPU's result holds a NaN (or an input did).
                None => assert!(draw >= 300 || has_nan(&want.y[0], *e), "{i}: result unknown from {s:x?}"),
            }
        }
        // (A packed square root is NaN when any of its lanes was negative.)
        assert!(known >= 50, "{i}: only {known} of 400 results known");
    }
}

/// Run `insn` natively as `native!` does, under MXCSR `csr`; the MXCSR after it comes back.
macro_rules! native_csr {
    ($insn:literal, $s:expr, $csr:expr) => {{
        let s: VecState = $s;
        let mut csr: u32 = $csr;
        let y = s.y.as_ptr();
        let mem = s.mem.as_ptr();
        // SAFETY: the asm reads the 128 bytes of `s.y`, the 64 of `s.mem` (through rdi) and
        // the 4 of `csr`, writes `csr` back, and restores the MXCSR it found.
        unsafe {
            std::arch::asm!(
                "sub rsp, 8",
                "stmxcsr [rsp]",
                "ldmxcsr [{c}]",
                "vmovdqu ymm0, [{y}]",
                "vmovdqu ymm1, [{y} + 32]",
                "vmovdqu ymm2, [{y} + 64]",
                "vmovdqu ymm3, [{y} + 96]",
                $insn,
                "stmxcsr [{c}]",
                "ldmxcsr [rsp]",
                "add rsp, 8",
                y = in(reg) y,
                c = in(reg) &mut csr,
                in("rdi") mem,
                out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            );
        }
        csr
    }};
}

/// The MXCSR after the emulator ran `i` from `s` under `csr`: None where its flags are unknown.
fn emulated_csr(i: iced_x86::Instruction, s: &VecState, csr: u32) -> Option<u32> {
    let (e, buf) = emulator_after(i, s, csr);
    std::hint::black_box(&buf);
    e.mxcsr.filter(|_| e.mxcsr_flags_known)
}

type NativeCsr = fn(VecState, u32) -> u32;

#[test]
fn fp_arithmetic_raises_the_cpus_exception_flags() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        eprintln!("skipped: needs AVX2 and FMA");
        return;
    }
    let m = || MemoryOperand::with_base(R::RDI);
    let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
    let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
    let (x0, x1, x2) = (R::XMM0, R::XMM1, R::XMM2);
    let (y0, y1, y2) = (R::YMM0, R::YMM1, R::YMM2);
    let cases: Vec<(I, NativeCsr, usize)> = vec![
        (r2(C::Addsd_xmm_xmmm64, x0, x1), |s, c| native_csr!("addsd xmm0, xmm1", s, c), 8),
        (r2(C::Subps_xmm_xmmm128, x0, x1), |s, c| native_csr!("subps xmm0, xmm1", s, c), 4),
        (r2(C::Mulsd_xmm_xmmm64, x0, x1), |s, c| native_csr!("mulsd xmm0, xmm1", s, c), 8),
        (r2(C::Divsd_xmm_xmmm64, x0, x1), |s, c| native_csr!("divsd xmm0, xmm1", s, c), 8),
        (r2(C::Sqrtsd_xmm_xmmm64, x0, x1), |s, c| native_csr!("sqrtsd xmm0, xmm1", s, c), 8),
        (r2(C::Minsd_xmm_xmmm64, x0, x1), |s, c| native_csr!("minsd xmm0, xmm1", s, c), 8),
        (
            r3(C::VEX_Vmulpd_ymm_ymm_ymmm256, y0, y1, y2),
            |s, c| native_csr!("vmulpd ymm0, ymm1, ymm2", s, c),
            8,
        ),
        (
            I::with3(C::VEX_Vdivps_ymm_ymm_ymmm256, y0, y1, m()).unwrap(),
            |s, c| native_csr!("vdivps ymm0, ymm1, [rdi]", s, c),
            4,
        ),
        (
            r3(C::VEX_Vfmadd231sd_xmm_xmm_xmmm64, x0, x1, x2),
            |s, c| native_csr!("vfmadd231sd xmm0, xmm1, xmm2", s, c),
            8,
        ),
        (I::with1(C::Stmxcsr_m32, m()).unwrap(), |s, c| native_csr!("stmxcsr [rdi]", s, c), 8),
    ];
    let mut seed = 0x6a09_e667_f3bc_c908u64 ^ u64::from(std::process::id());
    for (i, run, e) in &cases {
        let mut known = 0;
        for draw in 0..600 {
            let s = if draw % 3 == 2 {
                vec_state(&mut seed)
            } else {
                finite_state(&mut seed, *e)
            };
            // Start-up control bits, and a random set of flags already raised.
            let csr = 0x1f80 | (xorshift(&mut seed) as u32 & 0x3f);
            let want = run(s, csr);
            if let Some(got) = emulated_csr(*i, &s, csr) {
                assert_eq!(got, want, "{i} under {csr:#x} from {s:x?}");
                known += 1;
            }
        }
        assert!(known >= 100, "{i}: the flags known after only {known} of 600 draws");
    }
}
