//! General-purpose integer instructions (arithmetic, shifts, bits, strings, exchanges)
//! against the CPU and their definitions.

use super::*;

#[test]
fn compare_and_branch() {
    // cmp rax, rsi; jb
    let (t, _) = emu_run(&[0x48, 0x39, 0xf0, 0x72, 0x00], &[(0, 3), (6, 5)]);
    assert_eq!(t, Some(true));
    let (t, _) = emu_run(&[0x48, 0x39, 0xf0, 0x72, 0x00], &[(0, 5), (6, 5)]);
    assert_eq!(t, Some(false));
    // add rax, 4; cmp rax, rsi; jl (signed)
    let (t, r) = emu_run(
        &[0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x7c, 0x00],
        &[(0, u64::MAX - 10), (6, 0)],
    );
    assert_eq!((t, r[0]), (Some(true), Some(u64::MAX - 6)));
    // and eax, 0xfff; cmp eax, 0xfe0; ja
    let (t, r) = emu_run(
        &[0x25, 0xff, 0x0f, 0x00, 0x00, 0x3d, 0xe0, 0x0f, 0x00, 0x00, 0x77, 0x00],
        &[(0, 0x1234_5ff0)],
    );
    assert_eq!((t, r[0]), (Some(true), Some(0xff0)));
    // test eax, eax (eax = 0x100000000 low part 0); je
    let (t, _) = emu_run(&[0x85, 0xc0, 0x74, 0x00], &[(0, 1 << 32)]);
    assert_eq!(t, Some(true));
    // dec ecx; jne   (ecx = 1 -> 0)
    let (t, r) = emu_run(&[0xff, 0xc9, 0x75, 0x00], &[(1, 1)]);
    assert_eq!((t, r[1]), (Some(false), Some(0)));
}

/// One-operand mul/imul/div/idiv (64- and 32-bit) against the CPU on random operands, and
/// unknown where the CPU would raise #DE.
#[test]
fn multiply_and_divide_match_the_cpu() {
    use iced_x86::{Code as C, Instruction as I, Register as R};
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let jc = || I::with_branch(C::Jb_rel32_64, 0x1000).unwrap();
    for round in 0..400 {
        let (a, b) = (xorshift(&mut seed), xorshift(&mut seed));
        let b = if round % 4 == 0 { b % 1000 + 1 } else { b | 1 };
        // mul / imul rsi: rdx:rax, CF = OF = high half significant.
        let (hi, lo, cf): (u64, u64, u64);
        // SAFETY: register-only arithmetic; pushf/pop balanced.
        unsafe {
            std::arch::asm!("mul rsi", "pushfq", "pop {f}", f = out(reg) cf, inout("rax") a => lo, out("rdx") hi, in("rsi") b, options(nomem));
        }
        let (t, r) = emu_asm(&[I::with1(C::Mul_rm64, R::RSI).unwrap(), jc()], &[(0, a), (6, b)]);
        assert_eq!((r[0], r[2], t), (Some(lo), Some(hi), Some(cf & 1 == 1)), "mul {a:#x} {b:#x}");
        let (ihi, ilo, icf): (u64, u64, u64);
        // SAFETY: as above.
        unsafe {
            std::arch::asm!("imul rsi", "pushfq", "pop {f}", f = out(reg) icf, inout("rax") a => ilo, out("rdx") ihi, in("rsi") b, options(nomem));
        }
        let (t, r) = emu_asm(&[I::with1(C::Imul_rm64, R::RSI).unwrap(), jc()], &[(0, a), (6, b)]);
        assert_eq!((r[0], r[2], t), (Some(ilo), Some(ihi), Some(icf & 1 == 1)), "imul {a:#x} {b:#x}");
        let (h32, l32): (u64, u64);
        // SAFETY: as above.
        unsafe {
            std::arch::asm!("mul esi", inout("rax") a => l32, out("rdx") h32, in("rsi") b, options(nomem));
        }
        let (_, r) = emu_asm(&[I::with1(C::Mul_rm32, R::ESI).unwrap()], &[(0, a), (6, b)]);
        assert_eq!((r[0], r[2]), (Some(l32), Some(h32)), "mul32 {a:#x} {b:#x}");
        // div rsi with rdx < rsi (no #DE): quotient rax, remainder rdx.
        let d = b;
        let h = xorshift(&mut seed) % d;
        let (q, rem): (u64, u64);
        // SAFETY: rdx < rsi, so the quotient fits; register-only.
        unsafe {
            std::arch::asm!("div rsi", inout("rax") a => q, inout("rdx") h => rem, in("rsi") d, options(nomem));
        }
        let (_, r) = emu_asm(&[I::with1(C::Div_rm64, R::RSI).unwrap()], &[(0, a), (2, h), (6, d)]);
        assert_eq!((r[0], r[2]), (Some(q), Some(rem)), "div {h:#x}:{a:#x} / {d:#x}");
        // idiv after cqo (rdx the sign of rax): never #DE for d != 0, -1.
        let sd = if round % 2 == 0 { d } else { d.wrapping_neg() };
        let sh = ((a as i64) >> 63) as u64;
        let (iq, irem): (u64, u64);
        // SAFETY: rdx:rax is rax sign-extended and the divisor is neither 0 nor -1.
        unsafe {
            std::arch::asm!("idiv rsi", inout("rax") a => iq, inout("rdx") sh => irem, in("rsi") sd, options(nomem));
        }
        let (_, r) = emu_asm(&[I::with1(C::Idiv_rm64, R::RSI).unwrap()], &[(0, a), (2, sh), (6, sd)]);
        assert_eq!((r[0], r[2]), (Some(iq), Some(irem)), "idiv {a:#x} / {sd:#x}");
        let (iq32, irem32): (u64, u64);
        let sh32 = u64::from(((a as i32) >> 31) as u32);
        // SAFETY: as above, 32-bit.
        unsafe {
            std::arch::asm!("idiv esi", inout("rax") a => iq32, inout("rdx") sh32 => irem32, in("rsi") sd, options(nomem));
        }
        let sd32 = sd as u32;
        if sd32 != 0 && sd32 != u32::MAX {
            let (_, r) = emu_asm(&[I::with1(C::Idiv_rm32, R::ESI).unwrap()], &[(0, a), (2, sh32), (6, sd)]);
            assert_eq!((r[0], r[2]), (Some(iq32), Some(irem32)), "idiv32 {a:#x} / {sd:#x}");
        }
        // Where the CPU faults (#DE), the emulator knows nothing.
        let (_, r) = emu_asm(&[I::with1(C::Div_rm64, R::RSI).unwrap()], &[(0, a), (2, h), (6, 0)]);
        assert_eq!((r[0], r[2]), (None, None), "div by zero");
        let (_, r) = emu_asm(&[I::with1(C::Div_rm64, R::RSI).unwrap()], &[(0, a), (2, d), (6, d)]);
        assert_eq!((r[0], r[2]), (None, None), "div quotient too wide");
        let (_, r) = emu_asm(&[I::with1(C::Idiv_rm64, R::RSI).unwrap()], &[(0, 0), (2, 1 << 62), (6, 3)]);
        assert_eq!((r[0], r[2]), (None, None), "idiv quotient too wide");
    }
}

/// `rol`/`ror` by an immediate and by cl, 64, 32, 16 and 8 bits: value, CF, and OF where
/// the count is 1, against the CPU on random operands and counts (0 and multiples of the
/// width included); ZF is left as it was (set by a `cmp` before).
#[test]
fn rotates_match_the_cpu() {
    use iced_x86::{Code as C, Instruction as I, Register as R};
    let mut seed = 0x6a09_e667_f3bc_c908u64 ^ u64::from(std::process::id());
    let jcc = |c: C| I::with_branch(c, 0x1000).unwrap();
    for round in 0..400u64 {
        let a = xorshift(&mut seed);
        let c = match round % 4 {
            0 => 1,
            1 => 0,
            2 => 16 * (xorshift(&mut seed) % 3),
            _ => xorshift(&mut seed) % 256,
        } as u8;
        // Shifts by cl of a 32-bit register: written (zero-extended) even for a count of 0.
        for code in [C::Shl_rm32_CL, C::Shr_rm32_CL, C::Sar_rm32_CL] {
            let r: u64;
            // SAFETY: register-only shifts.
            unsafe {
                match code {
                    C::Shl_rm32_CL => std::arch::asm!("shl eax, cl", inout("rax") a => r, in("cl") c, options(nomem, nostack)),
                    C::Shr_rm32_CL => std::arch::asm!("shr eax, cl", inout("rax") a => r, in("cl") c, options(nomem, nostack)),
                    _ => std::arch::asm!("sar eax, cl", inout("rax") a => r, in("cl") c, options(nomem, nostack)),
                }
            }
            let (_, r1) = emu_asm(&[I::with2(code, R::EAX, R::CL).unwrap()], &[(0, a), (1, u64::from(c))]);
            assert_eq!(r1[0], Some(r), "{code:?} a={a:#x} c={c}");
        }
        for (ror, width) in [
            (false, 8),
            (true, 8),
            (false, 4),
            (true, 4),
            (false, 2),
            (true, 2),
            (false, 1),
            (true, 1),
        ] {
            let (r, f): (u64, u64);
            // SAFETY: register-only rotates; pushf/pop balanced. ZF is set (cmp of equals)
            // before, so an unchanged ZF shows.
            unsafe {
                match (ror, width) {
                    (false, 8) => {
                        std::arch::asm!("cmp rax, rax", "rol rax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (true, 8) => {
                        std::arch::asm!("cmp rax, rax", "ror rax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (false, 4) => {
                        std::arch::asm!("cmp rax, rax", "rol eax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (true, 4) => {
                        std::arch::asm!("cmp rax, rax", "ror eax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (false, 2) => {
                        std::arch::asm!("cmp rax, rax", "rol ax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (true, 2) => {
                        std::arch::asm!("cmp rax, rax", "ror ax, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (false, _) => {
                        std::arch::asm!("cmp rax, rax", "rol al, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                    (true, _) => {
                        std::arch::asm!("cmp rax, rax", "ror al, cl", "pushfq", "pop {f}", f = out(reg) f, inout("rax") a => r, in("cl") c, options(nomem))
                    }
                }
            }
            let (code_cl, code_imm, reg) = match (ror, width) {
                (false, 8) => (C::Rol_rm64_CL, C::Rol_rm64_imm8, R::RAX),
                (true, 8) => (C::Ror_rm64_CL, C::Ror_rm64_imm8, R::RAX),
                (false, 4) => (C::Rol_rm32_CL, C::Rol_rm32_imm8, R::EAX),
                (true, 4) => (C::Ror_rm32_CL, C::Ror_rm32_imm8, R::EAX),
                (false, 2) => (C::Rol_rm16_CL, C::Rol_rm16_imm8, R::AX),
                (true, 2) => (C::Ror_rm16_CL, C::Ror_rm16_imm8, R::AX),
                (false, _) => (C::Rol_rm8_CL, C::Rol_rm8_imm8, R::AL),
                (true, _) => (C::Ror_rm8_CL, C::Ror_rm8_imm8, R::AL),
            };
            let cmp = I::with2(C::Cmp_rm64_r64, R::RAX, R::RAX).unwrap();
            let forms = [
                I::with2(code_cl, reg, R::CL).unwrap(),
                I::with2(code_imm, reg, u32::from(c)).unwrap(),
            ];
            for form in forms {
                let (cf, r1) = emu_asm(&[cmp, form, jcc(C::Jb_rel32_64)], &[(0, a), (1, u64::from(c))]);
                assert_eq!(r1[0], Some(r), "{form} a={a:#x} c={c}");
                assert_eq!(cf, Some(f & 1 == 1), "CF {form} a={a:#x} c={c}");
                let (zf, _) = emu_asm(&[cmp, form, jcc(C::Je_rel32_64)], &[(0, a), (1, u64::from(c))]);
                assert_eq!(zf, Some(f >> 6 & 1 == 1), "ZF {form} a={a:#x} c={c}");
                let (of, _) = emu_asm(&[cmp, form, jcc(C::Jo_rel32_64)], &[(0, a), (1, u64::from(c))]);
                if c & if width == 8 { 63 } else { 31 } == 1 || c & if width == 8 { 63 } else { 31 } == 0 {
                    assert_eq!(of, Some(f >> 11 & 1 == 1), "OF {form} a={a:#x} c={c}");
                }
            }
        }
    }
}

#[test]
fn integer_extras_match_their_definitions() {
    use iced_x86::{Code as C, Instruction as I, Register as R};
    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
    let jcc = |c: C| I::with_branch(c, 0x1000).unwrap();
    for _ in 0..200 {
        let (a, b) = (xorshift(&mut seed), xorshift(&mut seed));
        // Small values too, where flags and counts have their edges.
        let (a, b) = if a % 3 == 0 { (a % 7, b % 7) } else { (a, b) };
        let (_, r) = emu_asm(&[I::with2(C::Imul_r64_rm64, R::RAX, R::RSI).unwrap()], &[(0, a), (6, b)]);
        assert_eq!(r[0], Some(a.wrapping_mul(b)));
        let (t, r) = emu_asm(
            &[
                I::with3(C::Imul_r32_rm32_imm32, R::ECX, R::ESI, b as i32).unwrap(),
                jcc(C::Jo_rel32_64),
            ],
            &[(6, a)],
        );
        let full = i64::from(a as i32) * i64::from(b as i32);
        assert_eq!(r[1], Some(u64::from(full as u32)));
        assert_eq!(t, Some(full != i64::from(full as i32)));
        let (_, r) = emu_asm(&[I::with1(C::Neg_rm64, R::RAX).unwrap()], &[(0, a)]);
        assert_eq!(r[0], Some(a.wrapping_neg()));
        let (_, r) = emu_asm(&[I::with1(C::Not_rm32, R::EAX).unwrap()], &[(0, a)]);
        assert_eq!(r[0], Some(u64::from(!(a as u32))));
        // cmp sets CF; adc/sbb use it; jb reads the new CF.
        let c = a < b;
        let (t, r) = emu_asm(
            &[
                I::with2(C::Cmp_rm64_r64, R::RAX, R::RSI).unwrap(),
                I::with2(C::Adc_rm64_r64, R::RCX, R::RDX).unwrap(),
                jcc(C::Jb_rel32_64),
            ],
            &[(0, a), (6, b), (1, a ^ b), (2, b)],
        );
        let wide = u128::from(a ^ b) + u128::from(b) + u128::from(c);
        assert_eq!((r[1], t), (Some(wide as u64), Some(wide > u128::from(u64::MAX))));
        let (t, r) = emu_asm(
            &[
                I::with2(C::Cmp_rm64_r64, R::RAX, R::RSI).unwrap(),
                I::with2(C::Sbb_rm32_r32, R::ECX, R::EDX).unwrap(),
                jcc(C::Jb_rel32_64),
            ],
            &[(0, a), (6, b), (1, a >> 7), (2, b >> 3)],
        );
        let (x, y) = (u64::from((a >> 7) as u32), u64::from((b >> 3) as u32));
        assert_eq!(r[1], Some(x.wrapping_sub(y).wrapping_sub(u64::from(c)) & 0xffff_ffff));
        assert_eq!(t, Some(u128::from(x) < u128::from(y) + u128::from(c)));
        // cmovb / setb after cmp.
        let (_, r) = emu_asm(
            &[
                I::with2(C::Cmp_rm64_r64, R::RAX, R::RSI).unwrap(),
                I::with2(C::Cmovb_r64_rm64, R::RCX, R::RDX).unwrap(),
                I::with1(C::Setb_rm8, R::BL).unwrap(),
            ],
            &[(0, a), (6, b), (1, 11), (2, 22), (3, 0xff00)],
        );
        assert_eq!(r[1], Some(if c { 22 } else { 11 }));
        assert_eq!(r[3], Some(0xff00 | u64::from(c)));
        // Bit scans and counts.
        let v = a >> (b % 64);
        let (_, r) = emu_asm(&[I::with2(C::Tzcnt_r64_rm64, R::RCX, R::RAX).unwrap()], &[(0, v)]);
        assert_eq!(r[1], Some(u64::from(v.trailing_zeros())));
        let (_, r) = emu_asm(&[I::with2(C::Lzcnt_r32_rm32, R::ECX, R::EAX).unwrap()], &[(0, v)]);
        assert_eq!(r[1], Some(u64::from((v as u32).leading_zeros())));
        let (_, r) = emu_asm(&[I::with2(C::Bsr_r64_rm64, R::RCX, R::RAX).unwrap()], &[(0, v), (1, 5)]);
        assert_eq!(r[1], (v != 0).then(|| u64::from(63 - v.leading_zeros())));
        let k = b % 80;
        let (_, r) = emu_asm(
            &[I::with3(C::VEX_Bzhi_r64_rm64_r64, R::RCX, R::RAX, R::RDX).unwrap()],
            &[(0, a), (2, k)],
        );
        assert_eq!(r[1], Some(if k < 64 { a & ((1u64 << k) - 1) } else { a }));
        // Sign extensions of the accumulator, and bt.
        let (_, r) = emu_asm(&[I::with(C::Cdqe)], &[(0, a)]);
        assert_eq!(r[0], Some(a as i32 as i64 as u64));
        let (_, r) = emu_asm(&[I::with(C::Cwde)], &[(0, a)]);
        assert_eq!(r[0], Some(u64::from(a as i16 as i32 as u32)));
        let (_, r) = emu_asm(&[I::with(C::Cqo)], &[(0, a), (2, b)]);
        assert_eq!(r[2], Some(((a as i64) >> 63) as u64));
        let (_, r) = emu_asm(&[I::with(C::Cdq)], &[(0, a), (2, b)]);
        assert_eq!(r[2], Some(u64::from(((a as i32) >> 31) as u32)));
        let (t, _) = emu_asm(
            &[I::with2(C::Bt_rm64_r64, R::RAX, R::RSI).unwrap(), jcc(C::Jb_rel32_64)],
            &[(0, a), (6, b)],
        );
        assert_eq!(t, Some(a >> (b % 64) & 1 == 1));
        let (t, _) = emu_asm(
            &[I::with2(C::Bt_rm32_imm8, R::EAX, (b % 256) as u32).unwrap(), jcc(C::Jae_rel32_64)],
            &[(0, a)],
        );
        assert_eq!(t, Some((a as u32) >> (b % 256 % 32) & 1 == 0));
        let (_, r) = emu_asm(&[I::with2(C::Shr_rm64_CL, R::RAX, R::CL).unwrap()], &[(0, a), (1, b)]);
        assert_eq!(r[0], Some(a >> (b % 64)));
        let (_, r) = emu_asm(
            &[I::with3(C::VEX_Sarx_r32_rm32_r32, R::ECX, R::EAX, R::EDX).unwrap()],
            &[(0, a), (2, b)],
        );
        assert_eq!(r[1], Some(u64::from(((a as i32) >> (b % 32)) as u32)));
    }
}

/// Registers a string, exchange or bit snippet reads and writes, and the flags after it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct IntState {
    rax: u64,
    rcx: u64,
    rsi: u64,
    rdi: u64,
    r8: u64,
    r9: u64,
    r10: u64,
}

macro_rules! native_int {
    ($s:expr; $($code:literal),+) => {{
        let mut s: IntState = $s;
        let flags: u64;
        // SAFETY: the snippet reads and writes only the buffers its registers point into
        // (the caller's), leaves the direction flag clear and balances its push and pop.
        unsafe {
            std::arch::asm!(
                $($code,)+
                "pushfq",
                "pop r11",
                inout("rax") s.rax,
                inout("rcx") s.rcx,
                inout("rsi") s.rsi,
                inout("rdi") s.rdi,
                inout("r8") s.r8,
                inout("r9") s.r9,
                inout("r10") s.r10,
                out("r11") flags,
            )
        };
        (s, flags)
    }};
}

#[test]
fn string_exchange_and_bit_instructions_match_the_cpu() {
    const CF: u64 = 1;
    const ZF: u64 = 1 << 6;
    const SF: u64 = 1 << 7;
    type Native = fn(IntState) -> (IntState, u64);
    // Each case: the snippet's bytes, the native run of the same text, and the flags it
    // defines at its end.
    let cases: Vec<(&[u8], Native, u64)> = vec![
        (
            // movsq; movsb; lodsw; stosd; mov r9, [r8]; mov r10, [r8+8]; cmpsb
            b"\x48\xa5\xa4\x66\xad\xab\x4d\x8b\x08\x4d\x8b\x50\x08\xa6",
            |s| native_int!(s; "movsq", "movsb", "lodsw", "stosd", "mov r9, [r8]", "mov r10, [r8+8]", "cmpsb"),
            CF | ZF | SF,
        ),
        // scasw
        (b"\x66\xaf", |s| native_int!(s; "scasw"), CF | ZF | SF),
        // std; movsq; lodsd; stosb; cld; mov r9, [r8]
        (
            b"\xfd\x48\xa5\xad\xaa\xfc\x4d\x8b\x08",
            |s| native_int!(s; "std", "movsq", "lodsd", "stosb", "cld", "mov r9, [r8]"),
            0,
        ),
        // lock cmpxchg [r8], rcx; mov r9, [r8]
        (
            b"\xf0\x49\x0f\xb1\x08\x4d\x8b\x08",
            |s| native_int!(s; "lock cmpxchg [r8], rcx", "mov r9, [r8]"),
            CF | ZF | SF,
        ),
        // cmpxchg r9d, ecx (a register destination, 32-bit)
        (b"\x41\x0f\xb1\xc9", |s| native_int!(s; "cmpxchg r9d, ecx"), CF | ZF | SF),
        // xchg [r8], rcx; mov r9, [r8]
        (b"\x49\x87\x08\x4d\x8b\x08", |s| native_int!(s; "xchg [r8], rcx", "mov r9, [r8]"), 0),
        // lock xadd [r8], rcx; mov r9, [r8]
        (
            b"\xf0\x49\x0f\xc1\x08\x4d\x8b\x08",
            |s| native_int!(s; "lock xadd [r8], rcx", "mov r9, [r8]"),
            CF | ZF | SF,
        ),
        // blsmsk rcx, rax
        (b"\xc4\xe2\xf0\xf3\xd0", |s| native_int!(s; "blsmsk rcx, rax"), CF | ZF | SF),
        // blsr rcx, rax
        (b"\xc4\xe2\xf0\xf3\xc8", |s| native_int!(s; "blsr rcx, rax"), CF | ZF | SF),
        // blsi rcx, rax
        (b"\xc4\xe2\xf0\xf3\xd8", |s| native_int!(s; "blsi rcx, rax"), CF | ZF | SF),
        // bts rax, rcx
        (b"\x48\x0f\xab\xc8", |s| native_int!(s; "bts rax, rcx"), CF),
        // btr eax, ecx
        (b"\x0f\xb3\xc8", |s| native_int!(s; "btr eax, ecx"), CF),
        // btc rax, 5
        (b"\x48\x0f\xba\xf8\x05", |s| native_int!(s; "btc rax, 5"), CF),
        // The high byte registers: and ah, 0x9f (libm's rounding-mode test on MXCSR)
        (b"\x80\xe4\x9f", |s| native_int!(s; "and ah, 0x9f"), CF | ZF | SF),
        // mov ch, al; add ah, ch; movzx ecx, ah
        (
            b"\x88\xc5\x00\xec\x0f\xb6\xcc",
            |s| native_int!(s; "mov ch, al", "add ah, ch", "movzx ecx, ah"),
            CF | ZF | SF,
        ),
    ];
    if !is_x86_feature_detected!("bmi1") {
        eprintln!("skipped: needs BMI1");
        return;
    }
    let mut seed = 0x3c6e_f372_fe94_f82bu64 ^ u64::from(std::process::id());
    for _ in 0..100 {
        for (bytes, native, defined) in &cases {
            let src: [u64; 4] = std::array::from_fn(|_| xorshift(&mut seed));
            let dst: [u64; 4] = std::array::from_fn(|_| xorshift(&mut seed));
            let mut native_dst = dst;
            // Equal operands half of the time, where compares and exchanges branch.
            let r = xorshift(&mut seed);
            let rax = if r.is_multiple_of(2) { dst[0] } else { xorshift(&mut seed) };
            let rax = if r.is_multiple_of(3) { rax & 0xff } else { rax };
            let rcx = if r.is_multiple_of(5) { 0 } else { xorshift(&mut seed) };
            // The direction-down snippet starts in the middle of the buffers.
            let mid = if bytes.starts_with(b"\xfd") { 16 } else { 0 };
            let at = |p: *const u64| p as u64 + mid;
            let start = IntState {
                rax,
                rcx,
                rsi: at(src.as_ptr()),
                rdi: at(dst.as_ptr()),
                r8: dst.as_ptr() as u64,
                ..IntState::default()
            };
            let set = |s: &IntState| [(0, s.rax), (1, s.rcx), (6, s.rsi), (7, s.rdi), (8, s.r8), (9, s.r9), (10, s.r10)];
            let with_jcc = |jcc: &[u8]| {
                let mut code = bytes.to_vec();
                code.extend_from_slice(jcc);
                emu_run(&code, &set(&start))
            };
            // (Emulated first: the emulator only reads the buffers.)
            let (cf, regs) = with_jcc(b"\x72\x00");
            let (zf, _) = with_jcc(b"\x74\x00");
            let (sf, _) = with_jcc(b"\x78\x00");
            let native_start = IntState {
                rsi: at(src.as_ptr()),
                rdi: at(native_dst.as_mut_ptr()),
                r8: native_dst.as_ptr() as u64,
                ..start
            };
            let (want, flags) = native(native_start);
            let shift = |v: u64| v.wrapping_sub(native_dst.as_ptr() as u64).wrapping_add(dst.as_ptr() as u64);
            let got = IntState {
                rax: regs[0].expect("rax"),
                rcx: regs[1].expect("rcx"),
                rsi: regs[6].expect("rsi"),
                rdi: regs[7].expect("rdi"),
                r8: regs[8].expect("r8"),
                r9: regs[9].expect("r9"),
                r10: regs[10].expect("r10"),
            };
            let want = IntState {
                rdi: shift(want.rdi),
                r8: shift(want.r8),
                ..want
            };
            assert_eq!(got, want, "{bytes:02x?} from {start:x?}");
            for (bit, emulated) in [(CF, cf), (ZF, zf), (SF, sf)] {
                if defined & bit != 0 {
                    assert_eq!(emulated, Some(flags & bit != 0), "{bytes:02x?} flag {bit:#x} from {start:x?}");
                }
            }
        }
    }
}
