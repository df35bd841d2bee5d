//! AVX-512 (EVEX) and opmask instructions against the CPU; the opmasks' seeding from the
//! XSAVE image.

use super::super::vector::low_bits;
use super::*;
use crate::counters::trace::sys::XsaveLayout;
use iced_x86::{Code as C, Instruction as I, MemoryOperand, Register as R};

/// ymm16–ymm19, k1–k3, rax and [rdi] around one AVX-512 instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(64))]
struct EvexState {
    y: [[u8; 32]; 4],
    mem: [u8; 64],
    k: [u64; 3],
    rax: u64,
}

/// Run `insn` natively from `s` (ymm16–19, k1–k3, rax, rdi → mem); flags come back.
macro_rules! native_evex {
    ($insn:literal, $s:expr) => {{
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
        unsafe fn run(s: &mut EvexState) -> u64 {
            let fl: u64;
            let y = s.y.as_mut_ptr();
            let k = s.k.as_mut_ptr();
            let mem = s.mem.as_mut_ptr();
            let mut rax = s.rax;
            // SAFETY: reads and writes only `s` (its vectors, masks and memory, through
            // rdi), clobbers the registers it names, balances its push/pop.
            unsafe {
                std::arch::asm!(
                    "vmovdqu64 ymm16, [{y}]",
                    "vmovdqu64 ymm17, [{y} + 32]",
                    "vmovdqu64 ymm18, [{y} + 64]",
                    "vmovdqu64 ymm19, [{y} + 96]",
                    "kmovq k1, [{k}]",
                    "kmovq k2, [{k} + 8]",
                    "kmovq k3, [{k} + 16]",
                    $insn,
                    "pushfq",
                    "pop {fl}",
                    "vmovdqu64 [{y}], ymm16",
                    "vmovdqu64 [{y} + 32], ymm17",
                    "vmovdqu64 [{y} + 64], ymm18",
                    "vmovdqu64 [{y} + 96], ymm19",
                    "kmovq [{k}], k1",
                    "kmovq [{k} + 8], k2",
                    "kmovq [{k} + 16], k3",
                    y = in(reg) y,
                    k = in(reg) k,
                    fl = out(reg) fl,
                    inout("rax") rax,
                    in("rdi") mem,
                    out("ymm16") _, out("ymm17") _, out("ymm18") _, out("ymm19") _,
                    out("k1") _, out("k2") _, out("k3") _,
                );
            }
            s.rax = rax;
            fl
        }
        let mut s: EvexState = $s;
        // SAFETY: the caller checked AVX-512 F/BW/VL/DQ.
        let fl = unsafe { run(&mut s) };
        (s, fl)
    }};
}

/// The same instruction through the emulator from the same state.
fn emulated_evex(i: iced_x86::Instruction, s: &EvexState) -> (Option<EvexState>, Flags) {
    let mut enc = iced_x86::Encoder::new(64);
    enc.encode(&i, 0x1000).unwrap();
    let bytes = enc.take_buffer();
    let mut d = Decoder::with_ip(64, &bytes, 0x1000, DecoderOptions::NONE);
    let insn = d.decode();
    assert_eq!(insn.code(), i.code(), "{i} round trip");
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut e = Emu::new(&regs, mem);
    let buf = Box::new(*s);
    e.regs[0] = Some(s.rax);
    e.regs[7] = Some(buf.mem.as_ptr() as u64);
    for (n, y) in s.y.iter().enumerate() {
        e.vregs[16 + n].val[..32].copy_from_slice(y);
        e.vregs[16 + n].known = low_bits(32);
        e.vregs[16 + n].fresh = 0;
    }
    for (n, k) in s.k.iter().enumerate() {
        e.kwrite(n + 1, Some(*k));
    }
    e.step(&insn, &mut InstructionInfoFactory::new());
    let mut out = *s;
    let Some(rax) = e.regs[0] else { return (None, e.flags) };
    out.rax = rax;
    for n in 0..4 {
        match e.vread(Register::YMM16 + n as u32, 32) {
            Some(v) => out.y[n].copy_from_slice(&v[..32]),
            None => return (None, e.flags),
        }
    }
    for n in 0..3 {
        match e.kread(n + 1) {
            Some(v) => out.k[n] = v,
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

fn evex_state(seed: &mut u64) -> EvexState {
    let mut s = EvexState {
        y: [[0; 32]; 4],
        mem: [0; 64],
        k: [0; 3],
        rax: xorshift(seed),
    };
    for b in s.mem.iter_mut() {
        *b = xorshift(seed) as u8;
    }
    for n in 0..4 {
        for j in 0..32 {
            let r = xorshift(seed);
            s.y[n][j] = match r % 5 {
                0 if n > 0 => s.y[0][j],
                1 => s.mem[j],
                2 => 0,
                _ => (r >> 8) as u8,
            };
        }
    }
    for k in s.k.iter_mut() {
        let r = xorshift(seed);
        *k = match r % 6 {
            0 => 0,
            1 => u64::MAX,
            2 => u64::from(u32::MAX),
            3 => r >> 32,
            _ => xorshift(seed),
        };
    }
    s
}

/// The native run of one instruction's text from a state, and the flags after it.
type Native = fn(EvexState) -> (EvexState, u64);

/// Compares into an opmask: the instruction for the emulator and the native run of the same text.
fn compare_cases() -> Vec<(I, Native)> {
    let m = || MemoryOperand::with_base(R::RDI);
    let (y16, y17) = (R::YMM16, R::YMM17);
    let (k1, k2) = (R::K1, R::K2);
    let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
    let masked = |mut i: I, k: R, z: bool| {
        i.set_op_mask(k);
        i.set_zeroing_masking(z);
        i
    };
    let cmpi = |c: C, imm: u32| I::with4(c, k1, y16, y17, imm).unwrap();
    vec![
        (r3(C::EVEX_Vpcmpeqb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
            native_evex!("vpcmpeqb k1, ymm16, ymm17", s)
        }),
        (masked(r3(C::EVEX_Vpcmpeqb_kr_k1_ymm_ymmm256, k1, y16, y17), k2, false), |s| {
            native_evex!("vpcmpeqb k1{{k2}}, ymm16, ymm17", s)
        }),
        (I::with3(C::EVEX_Vpcmpeqb_kr_k1_ymm_ymmm256, k1, y16, m()).unwrap(), |s| {
            native_evex!("vpcmpeqb k1, ymm16, [rdi]", s)
        }),
        (r3(C::EVEX_Vpcmpeqd_kr_k1_ymm_ymmm256b32, k1, y16, y17), |s| {
            native_evex!("vpcmpeqd k1, ymm16, ymm17", s)
        }),
        (r3(C::EVEX_Vpcmpgtb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
            native_evex!("vpcmpgtb k1, ymm16, ymm17", s)
        }),
        (r3(C::EVEX_Vpcmpeqb_kr_k1_xmm_xmmm128, k1, R::XMM16, R::XMM17), |s| {
            native_evex!("vpcmpeqb k1, xmm16, xmm17", s)
        }),
        (r3(C::EVEX_Vptestmb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
            native_evex!("vptestmb k1, ymm16, ymm17", s)
        }),
        (r3(C::EVEX_Vptestnmb_kr_k1_ymm_ymmm256, k1, y16, y17), |s| {
            native_evex!("vptestnmb k1, ymm16, ymm17", s)
        }),
        (r3(C::EVEX_Vptestnmd_kr_k1_ymm_ymmm256b32, k1, y16, y17), |s| {
            native_evex!("vptestnmd k1, ymm16, ymm17", s)
        }),
        (r3(C::EVEX_Vptestmd_kr_k1_ymm_ymmm256b32, k1, y16, y17), |s| {
            native_evex!("vptestmd k1, ymm16, ymm17", s)
        }),
        (cmpi(C::EVEX_Vpcmpub_kr_k1_ymm_ymmm256_imm8, 1), |s| {
            native_evex!("vpcmpub k1, ymm16, ymm17, 1", s)
        }),
        (cmpi(C::EVEX_Vpcmpub_kr_k1_ymm_ymmm256_imm8, 4), |s| {
            native_evex!("vpcmpub k1, ymm16, ymm17, 4", s)
        }),
        (cmpi(C::EVEX_Vpcmpub_kr_k1_ymm_ymmm256_imm8, 6), |s| {
            native_evex!("vpcmpub k1, ymm16, ymm17, 6", s)
        }),
        (cmpi(C::EVEX_Vpcmpb_kr_k1_ymm_ymmm256_imm8, 1), |s| {
            native_evex!("vpcmpb k1, ymm16, ymm17, 1", s)
        }),
        (cmpi(C::EVEX_Vpcmpb_kr_k1_ymm_ymmm256_imm8, 2), |s| {
            native_evex!("vpcmpb k1, ymm16, ymm17, 2", s)
        }),
        (cmpi(C::EVEX_Vpcmpb_kr_k1_ymm_ymmm256_imm8, 5), |s| {
            native_evex!("vpcmpb k1, ymm16, ymm17, 5", s)
        }),
        (cmpi(C::EVEX_Vpcmpud_kr_k1_ymm_ymmm256b32_imm8, 4), |s| {
            native_evex!("vpcmpud k1, ymm16, ymm17, 4", s)
        }),
        (cmpi(C::EVEX_Vpcmpuw_kr_k1_ymm_ymmm256_imm8, 2), |s| {
            native_evex!("vpcmpuw k1, ymm16, ymm17, 2", s)
        }),
        (cmpi(C::EVEX_Vpcmpq_kr_k1_ymm_ymmm256b64_imm8, 6), |s| {
            native_evex!("vpcmpq k1, ymm16, ymm17, 6", s)
        }),
    ]
}

/// The opmask instructions, as `compare_cases`.
fn opmask_cases() -> Vec<(I, Native)> {
    let m = || MemoryOperand::with_base(R::RDI);
    let (k1, k2, k3) = (R::K1, R::K2, R::K3);
    let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
    let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
    vec![
        (r2(C::VEX_Kmovd_r32_kr, R::EAX, k1), |s| native_evex!("kmovd eax, k1", s)),
        (r2(C::VEX_Kmovq_r64_kr, R::RAX, k1), |s| native_evex!("kmovq rax, k1", s)),
        (r2(C::VEX_Kmovb_r32_kr, R::EAX, k1), |s| native_evex!("kmovb eax, k1", s)),
        (r2(C::VEX_Kmovw_kr_r32, k1, R::EAX), |s| native_evex!("kmovw k1, eax", s)),
        (r2(C::VEX_Kmovd_kr_r32, k1, R::EAX), |s| native_evex!("kmovd k1, eax", s)),
        (r2(C::VEX_Kmovq_kr_r64, k1, R::RAX), |s| native_evex!("kmovq k1, rax", s)),
        (r2(C::VEX_Kmovq_kr_km64, k1, k2), |s| native_evex!("kmovq k1, k2", s)),
        (r2(C::VEX_Kmovb_kr_km8, k1, k2), |s| native_evex!("kmovb k1, k2", s)),
        (I::with2(C::VEX_Kmovd_kr_km32, k1, m()).unwrap(), |s| {
            native_evex!("kmovd k1, [rdi]", s)
        }),
        (I::with2(C::VEX_Kmovq_m64_kr, m(), k2).unwrap(), |s| {
            native_evex!("kmovq [rdi], k2", s)
        }),
        (r2(C::VEX_Kortestd_kr_kr, k1, k2), |s| native_evex!("kortestd k1, k2", s)),
        (r2(C::VEX_Kortestq_kr_kr, k1, k2), |s| native_evex!("kortestq k1, k2", s)),
        (r2(C::VEX_Kortestb_kr_kr, k1, k2), |s| native_evex!("kortestb k1, k2", s)),
        (r2(C::VEX_Kortestw_kr_kr, k3, k3), |s| native_evex!("kortestw k3, k3", s)),
        (r2(C::VEX_Ktestd_kr_kr, k1, k2), |s| native_evex!("ktestd k1, k2", s)),
        (r2(C::VEX_Ktestq_kr_kr, k1, k2), |s| native_evex!("ktestq k1, k2", s)),
        (r3(C::VEX_Kord_kr_kr_kr, k1, k2, k3), |s| native_evex!("kord k1, k2, k3", s)),
        (r3(C::VEX_Kandnq_kr_kr_kr, k1, k2, k3), |s| native_evex!("kandnq k1, k2, k3", s)),
        (r3(C::VEX_Kxnorq_kr_kr_kr, k1, k2, k3), |s| native_evex!("kxnorq k1, k2, k3", s)),
        (r3(C::VEX_Kxorw_kr_kr_kr, k1, k2, k3), |s| native_evex!("kxorw k1, k2, k3", s)),
        (r3(C::VEX_Kaddd_kr_kr_kr, k1, k2, k3), |s| native_evex!("kaddd k1, k2, k3", s)),
        (r3(C::VEX_Kunpckbw_kr_kr_kr, k1, k2, k3), |s| native_evex!("kunpckbw k1, k2, k3", s)),
        (r3(C::VEX_Kunpckdq_kr_kr_kr, k1, k2, k3), |s| native_evex!("kunpckdq k1, k2, k3", s)),
        (r2(C::VEX_Knotd_kr_kr, k1, k2), |s| native_evex!("knotd k1, k2", s)),
        (I::with3(C::VEX_Kshiftlq_kr_kr_imm8, k1, k2, 13u32).unwrap(), |s| {
            native_evex!("kshiftlq k1, k2, 13", s)
        }),
        (I::with3(C::VEX_Kshiftrd_kr_kr_imm8, k1, k2, 7u32).unwrap(), |s| {
            native_evex!("kshiftrd k1, k2, 7", s)
        }),
        (I::with3(C::VEX_Kshiftrw_kr_kr_imm8, k1, k2, 40u32).unwrap(), |s| {
            native_evex!("kshiftrw k1, k2, 40", s)
        }),
    ]
}

/// EVEX moves (masked and not), bitwise and lane operations, `vpternlog`, broadcasts, as
/// `compare_cases`.
fn move_and_lane_cases() -> Vec<(I, Native)> {
    let m = || MemoryOperand::with_base(R::RDI);
    let (y16, y17, y18) = (R::YMM16, R::YMM17, R::YMM18);
    let (k1, k2, k3) = (R::K1, R::K2, R::K3);
    let r2 = |c: C, a: R, b: R| I::with2(c, a, b).unwrap();
    let r3 = |c: C, a: R, b: R, d: R| I::with3(c, a, b, d).unwrap();
    let masked = |mut i: I, k: R, z: bool| {
        i.set_op_mask(k);
        i.set_zeroing_masking(z);
        i
    };
    vec![
        (I::with2(C::EVEX_Vmovdqu64_ymm_k1z_ymmm256, y16, m()).unwrap(), |s| {
            native_evex!("vmovdqu64 ymm16, [rdi]", s)
        }),
        (I::with2(C::EVEX_Vmovdqa64_ymm_k1z_ymmm256, y16, m()).unwrap(), |s| {
            native_evex!("vmovdqa64 ymm16, [rdi]", s)
        }),
        (
            masked(I::with2(C::EVEX_Vmovdqu8_ymm_k1z_ymmm256, y16, m()).unwrap(), k1, true),
            |s| native_evex!("vmovdqu8 ymm16{{k1}}{{z}}, [rdi]", s),
        ),
        (masked(r2(C::EVEX_Vmovdqu8_ymm_k1z_ymmm256, y16, y17), k2, false), |s| {
            native_evex!("vmovdqu8 ymm16{{k2}}, ymm17", s)
        }),
        (masked(r2(C::EVEX_Vmovdqu32_ymm_k1z_ymmm256, y16, y17), k2, true), |s| {
            native_evex!("vmovdqu32 ymm16{{k2}}{{z}}, ymm17", s)
        }),
        (I::with2(C::EVEX_Vmovdqu64_ymmm256_k1z_ymm, m(), y17).unwrap(), |s| {
            native_evex!("vmovdqu64 [rdi], ymm17", s)
        }),
        (I::with2(C::EVEX_Vmovdqu64_xmmm128_k1z_xmm, m(), R::XMM18).unwrap(), |s| {
            native_evex!("vmovdqu64 [rdi], xmm18", s)
        }),
        (
            masked(I::with2(C::EVEX_Vmovdqu8_ymmm256_k1z_ymm, m(), y17).unwrap(), k1, false),
            |s| native_evex!("vmovdqu8 [rdi]{{k1}}, ymm17", s),
        ),
        (
            masked(I::with2(C::EVEX_Vmovdqu32_xmmm128_k1z_xmm, m(), R::XMM18).unwrap(), k2, false),
            |s| native_evex!("vmovdqu32 [rdi]{{k2}}, xmm18", s),
        ),
        (
            masked(I::with2(C::EVEX_Vmovups_ymmm256_k1z_ymm, m(), y17).unwrap(), k3, false),
            |s| native_evex!("vmovups [rdi]{{k3}}, ymm17", s),
        ),
        (r3(C::EVEX_Vpxorq_ymm_k1z_ymm_ymmm256b64, y16, y17, y18), |s| {
            native_evex!("vpxorq ymm16, ymm17, ymm18", s)
        }),
        (r3(C::EVEX_Vpxord_xmm_k1z_xmm_xmmm128b32, R::XMM16, R::XMM16, R::XMM16), |s| {
            native_evex!("vpxord xmm16, xmm16, xmm16", s)
        }),
        (r3(C::EVEX_Vpord_ymm_k1z_ymm_ymmm256b32, y16, y17, y18), |s| {
            native_evex!("vpord ymm16, ymm17, ymm18", s)
        }),
        (r3(C::EVEX_Vpandnq_ymm_k1z_ymm_ymmm256b64, y16, y17, y18), |s| {
            native_evex!("vpandnq ymm16, ymm17, ymm18", s)
        }),
        (r3(C::EVEX_Vpminub_ymm_k1z_ymm_ymmm256, y16, y17, y18), |s| {
            native_evex!("vpminub ymm16, ymm17, ymm18", s)
        }),
        (r3(C::EVEX_Vpminud_ymm_k1z_ymm_ymmm256b32, y16, y17, y18), |s| {
            native_evex!("vpminud ymm16, ymm17, ymm18", s)
        }),
        (r3(C::EVEX_Vpsubb_ymm_k1z_ymm_ymmm256, y16, y17, y18), |s| {
            native_evex!("vpsubb ymm16, ymm17, ymm18", s)
        }),
        (I::with3(C::EVEX_Vpminub_ymm_k1z_ymm_ymmm256, y16, y17, m()).unwrap(), |s| {
            native_evex!("vpminub ymm16, ymm17, [rdi]", s)
        }),
        (
            I::with4(C::EVEX_Vpternlogd_ymm_k1z_ymm_ymmm256b32_imm8, y16, y17, y18, 0x96u32).unwrap(),
            |s| native_evex!("vpternlogd ymm16, ymm17, ymm18, 0x96", s),
        ),
        (
            I::with4(C::EVEX_Vpternlogd_ymm_k1z_ymm_ymmm256b32_imm8, y16, y17, y18, 0xdeu32).unwrap(),
            |s| native_evex!("vpternlogd ymm16, ymm17, ymm18, 0xde", s),
        ),
        (
            I::with4(C::EVEX_Vpternlogq_ymm_k1z_ymm_ymmm256b64_imm8, y16, y17, y18, 0x81u32).unwrap(),
            |s| native_evex!("vpternlogq ymm16, ymm17, ymm18, 0x81", s),
        ),
        (r2(C::EVEX_Vpbroadcastb_ymm_k1z_r32, y16, R::EAX), |s| {
            native_evex!("vpbroadcastb ymm16, eax", s)
        }),
        (r2(C::EVEX_Vpbroadcastd_ymm_k1z_r32, y16, R::EAX), |s| {
            native_evex!("vpbroadcastd ymm16, eax", s)
        }),
        (r2(C::EVEX_Vpbroadcastq_ymm_k1z_r64, y16, R::RAX), |s| {
            native_evex!("vpbroadcastq ymm16, rax", s)
        }),
    ]
}

#[test]
fn avx512_mask_and_evex_ops_match_the_cpu() {
    if !["avx512f", "avx512bw", "avx512vl", "avx512dq"].iter().all(|f| match *f {
        "avx512f" => is_x86_feature_detected!("avx512f"),
        "avx512bw" => is_x86_feature_detected!("avx512bw"),
        "avx512vl" => is_x86_feature_detected!("avx512vl"),
        _ => is_x86_feature_detected!("avx512dq"),
    }) {
        eprintln!("skipped: needs AVX-512 F/BW/VL/DQ");
        return;
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
    let cases = [compare_cases(), opmask_cases(), move_and_lane_cases()].concat();
    for (i, run) in &cases {
        for _ in 0..64 {
            let s = evex_state(&mut seed);
            let (want, fl) = run(s);
            let (got, flags) = emulated_evex(*i, &s);
            let got = got.unwrap_or_else(|| panic!("{i}: result unknown from {s:x?}"));
            assert_eq!(got, want, "{i} from {s:x?}");
            if i.rflags_modified() != 0 {
                for (f, bit) in [(flags.cf, 0), (flags.pf, 2), (flags.zf, 6), (flags.sf, 7), (flags.of, 11)] {
                    assert_eq!(f, Some(fl >> bit & 1 == 1), "{i} flag bit {bit} from {s:x?}");
                }
            }
        }
    }
}

/// Without AVX-512 hardware: opmasks come from the XSAVE image (zero in their initial
/// state), a compare into k1 feeds kortest, and an unmodelled write makes k unknown.
#[test]
fn opmasks_seeded_from_the_image_and_forgotten() {
    use iced_x86::{Code as C, Instruction as I, Register as R};
    let mut layout = XsaveLayout::of_this_cpu();
    if layout.opmask == 0 {
        // (A layout as an AVX-512 CPU has it, for the decoding and seeding logic.)
        layout = XsaveLayout {
            size: 2696,
            ymm_hi: 576,
            opmask: 1088,
            zmm_hi: 1152,
            hi16_zmm: 1664,
            tilecfg: 0,
        };
    }
    let mut seed = 0x51a7_e0f1_c3b2_a190u64 ^ u64::from(std::process::id());
    let mut img = vec![0u8; layout.size];
    for b in img.iter_mut() {
        *b = xorshift(&mut seed) as u8;
    }
    img[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    img[512..520].copy_from_slice(&0xe7u64.to_le_bytes());
    let k5 = u64::from_le_bytes(img[layout.opmask + 40..layout.opmask + 48].try_into().unwrap());
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut f = InstructionInfoFactory::new();
    let image = img.clone();
    let vs = VectorSeed::new(layout, Box::new(move || Some(image.clone())));
    let mut e = Emu::new(&regs, mem.clone()).with_vectors(vs);
    e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K5).unwrap(), &mut f);
    assert_eq!(e.regs[1], Some(k5));
    e.step(&I::with2(C::VEX_Kortestq_kr_kr, R::K5, R::K5).unwrap(), &mut f);
    assert_eq!(e.flags.zf, Some(k5 == 0));
    // XSTATE_BV bit 5 clear: every opmask is zero whatever the image's bytes.
    let mut init = img.clone();
    init[512..520].copy_from_slice(&0xc7u64.to_le_bytes());
    let vs0 = VectorSeed::new(layout, Box::new(move || Some(init.clone())));
    let mut e0 = Emu::new(&regs, mem.clone()).with_vectors(vs0);
    e0.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K5).unwrap(), &mut f);
    assert_eq!(e0.regs[1], Some(0));
    // An unmodelled masked EVEX op writing k (vfpclasspd) leaves k unknown; so does a syscall.
    e.step(
        &I::with3(C::EVEX_Vfpclasspd_kr_k1_ymmm256b64_imm8, R::K5, R::YMM1, 0x22u32).unwrap(),
        &mut f,
    );
    e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K5).unwrap(), &mut f);
    assert_eq!(e.regs[1], None);
    e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RDX, R::K4).unwrap(), &mut f);
    assert!(e.regs[2].is_some());
    e.step(&I::with(C::Syscall), &mut f);
    e.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RDX, R::K4).unwrap(), &mut f);
    assert_eq!(e.regs[2], None);
    // Without a seed, an opmask from before the path is unknown; one the path wrote is known.
    let mut e3 = Emu::new(&regs, mem);
    e3.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K1).unwrap(), &mut f);
    assert_eq!(e3.regs[1], None);
    let v = xorshift(&mut seed);
    e3.regs[0] = Some(v);
    e3.step(&I::with2(C::VEX_Kmovd_kr_r32, R::K1, R::EAX).unwrap(), &mut f);
    e3.step(&I::with2(C::VEX_Knotd_kr_kr, R::K2, R::K1).unwrap(), &mut f);
    e3.step(&I::with2(C::VEX_Kmovq_r64_kr, R::RCX, R::K2).unwrap(), &mut f);
    assert_eq!(e3.regs[1], Some(u64::from(!(v as u32))));
    e3.step(&I::with2(C::VEX_Kortestd_kr_kr, R::K1, R::K2).unwrap(), &mut f);
    assert_eq!((e3.flags.zf, e3.flags.cf), (Some(false), Some(true)));
}
