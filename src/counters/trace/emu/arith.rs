//! Floating-point arithmetic of SSE and AVX (legacy and VEX encodings): add, subtract,
//! multiply, divide, square root, minimum, maximum and the FMA3 forms, scalar and packed,
//! single and double precision.
//!
//! The results are computed here with Rust's `f64`/`f32` operations, which are IEEE 754's
//! correctly rounded ones: under the MXCSR every program starts with (round to nearest, no
//! flush-to-zero, no denormals-are-zero, every exception masked) the CPU gives the same bits.
//! Any other MXCSR, or one that is not known, leaves the instruction to the caller (its
//! destination unknown). So does a NaN among the inputs or the results: the CPU's choice of
//! which NaN comes out depends on the operand order, which a compiled `a + b` need not keep.
//! The sticky exception flags of MXCSR are followed where this module can tell exactly which
//! an operation raises (`raised`); where it cannot, they become unknown, and a later `stmxcsr`
//! stores an unknown value. `stmxcsr` and `ldmxcsr` themselves are modelled here: libm saves
//! MXCSR on every `sin` and `cos` to test its rounding bits.

use iced_x86::{Instruction, Mnemonic, OpKind};

use super::Emu;
use super::vector::{elem, is_vec, put_elem};

/// The control bits of MXCSR (bits 6–15: DAZ, the six exception masks, rounding, FTZ) under
/// which the CPU's arithmetic is IEEE's: all masks set, the rest clear (0x1F80 at start-up).
const MXCSR_CONTROL: u32 = 0xFFC0;
const MXCSR_IEEE: u32 = 0x1F80;

const FLAG_DE: u32 = 1 << 1;
const FLAG_ZE: u32 = 1 << 2;
const FLAG_OE: u32 = 1 << 3;
const FLAG_UE: u32 = 1 << 4;
const FLAG_PE: u32 = 1 << 5;

/// The operation of an arithmetic instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Sqrt,
    /// `±(a·b) ± c`: whether the product and the addend are negated.
    Fma {
        negate_product: bool,
        subtract: bool,
    },
}

/// Which operands an FMA3 form multiplies and which it adds (1: the destination, 2: the
/// second operand, 3: the third): 132 is `1·3 + 2`, 213 is `2·1 + 3`, 231 is `2·3 + 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FmaOrder {
    O132,
    O213,
    O231,
}

/// An arithmetic mnemonic: its operation, its element size in bytes, whether it is scalar
/// (the low element only), and for FMA3 its operand order.
fn arith_op(m: Mnemonic) -> Option<(Op, usize, bool, Option<FmaOrder>)> {
    use Mnemonic as M;
    let fma = |negate_product: bool, subtract: bool| Op::Fma { negate_product, subtract };
    Some(match m {
        M::Addsd | M::Vaddsd => (Op::Add, 8, true, None),
        M::Addss | M::Vaddss => (Op::Add, 4, true, None),
        M::Addpd | M::Vaddpd => (Op::Add, 8, false, None),
        M::Addps | M::Vaddps => (Op::Add, 4, false, None),
        M::Subsd | M::Vsubsd => (Op::Sub, 8, true, None),
        M::Subss | M::Vsubss => (Op::Sub, 4, true, None),
        M::Subpd | M::Vsubpd => (Op::Sub, 8, false, None),
        M::Subps | M::Vsubps => (Op::Sub, 4, false, None),
        M::Mulsd | M::Vmulsd => (Op::Mul, 8, true, None),
        M::Mulss | M::Vmulss => (Op::Mul, 4, true, None),
        M::Mulpd | M::Vmulpd => (Op::Mul, 8, false, None),
        M::Mulps | M::Vmulps => (Op::Mul, 4, false, None),
        M::Divsd | M::Vdivsd => (Op::Div, 8, true, None),
        M::Divss | M::Vdivss => (Op::Div, 4, true, None),
        M::Divpd | M::Vdivpd => (Op::Div, 8, false, None),
        M::Divps | M::Vdivps => (Op::Div, 4, false, None),
        M::Minsd | M::Vminsd => (Op::Min, 8, true, None),
        M::Minss | M::Vminss => (Op::Min, 4, true, None),
        M::Minpd | M::Vminpd => (Op::Min, 8, false, None),
        M::Minps | M::Vminps => (Op::Min, 4, false, None),
        M::Maxsd | M::Vmaxsd => (Op::Max, 8, true, None),
        M::Maxss | M::Vmaxss => (Op::Max, 4, true, None),
        M::Maxpd | M::Vmaxpd => (Op::Max, 8, false, None),
        M::Maxps | M::Vmaxps => (Op::Max, 4, false, None),
        M::Sqrtsd | M::Vsqrtsd => (Op::Sqrt, 8, true, None),
        M::Sqrtss | M::Vsqrtss => (Op::Sqrt, 4, true, None),
        M::Sqrtpd | M::Vsqrtpd => (Op::Sqrt, 8, false, None),
        M::Sqrtps | M::Vsqrtps => (Op::Sqrt, 4, false, None),
        M::Vfmadd132pd => (fma(false, false), 8, false, Some(FmaOrder::O132)),
        M::Vfmadd132ps => (fma(false, false), 4, false, Some(FmaOrder::O132)),
        M::Vfmadd132sd => (fma(false, false), 8, true, Some(FmaOrder::O132)),
        M::Vfmadd132ss => (fma(false, false), 4, true, Some(FmaOrder::O132)),
        M::Vfmadd213pd => (fma(false, false), 8, false, Some(FmaOrder::O213)),
        M::Vfmadd213ps => (fma(false, false), 4, false, Some(FmaOrder::O213)),
        M::Vfmadd213sd => (fma(false, false), 8, true, Some(FmaOrder::O213)),
        M::Vfmadd213ss => (fma(false, false), 4, true, Some(FmaOrder::O213)),
        M::Vfmadd231pd => (fma(false, false), 8, false, Some(FmaOrder::O231)),
        M::Vfmadd231ps => (fma(false, false), 4, false, Some(FmaOrder::O231)),
        M::Vfmadd231sd => (fma(false, false), 8, true, Some(FmaOrder::O231)),
        M::Vfmadd231ss => (fma(false, false), 4, true, Some(FmaOrder::O231)),
        M::Vfmsub132pd => (fma(false, true), 8, false, Some(FmaOrder::O132)),
        M::Vfmsub132ps => (fma(false, true), 4, false, Some(FmaOrder::O132)),
        M::Vfmsub132sd => (fma(false, true), 8, true, Some(FmaOrder::O132)),
        M::Vfmsub132ss => (fma(false, true), 4, true, Some(FmaOrder::O132)),
        M::Vfmsub213pd => (fma(false, true), 8, false, Some(FmaOrder::O213)),
        M::Vfmsub213ps => (fma(false, true), 4, false, Some(FmaOrder::O213)),
        M::Vfmsub213sd => (fma(false, true), 8, true, Some(FmaOrder::O213)),
        M::Vfmsub213ss => (fma(false, true), 4, true, Some(FmaOrder::O213)),
        M::Vfmsub231pd => (fma(false, true), 8, false, Some(FmaOrder::O231)),
        M::Vfmsub231ps => (fma(false, true), 4, false, Some(FmaOrder::O231)),
        M::Vfmsub231sd => (fma(false, true), 8, true, Some(FmaOrder::O231)),
        M::Vfmsub231ss => (fma(false, true), 4, true, Some(FmaOrder::O231)),
        M::Vfnmadd132pd => (fma(true, false), 8, false, Some(FmaOrder::O132)),
        M::Vfnmadd132ps => (fma(true, false), 4, false, Some(FmaOrder::O132)),
        M::Vfnmadd132sd => (fma(true, false), 8, true, Some(FmaOrder::O132)),
        M::Vfnmadd132ss => (fma(true, false), 4, true, Some(FmaOrder::O132)),
        M::Vfnmadd213pd => (fma(true, false), 8, false, Some(FmaOrder::O213)),
        M::Vfnmadd213ps => (fma(true, false), 4, false, Some(FmaOrder::O213)),
        M::Vfnmadd213sd => (fma(true, false), 8, true, Some(FmaOrder::O213)),
        M::Vfnmadd213ss => (fma(true, false), 4, true, Some(FmaOrder::O213)),
        M::Vfnmadd231pd => (fma(true, false), 8, false, Some(FmaOrder::O231)),
        M::Vfnmadd231ps => (fma(true, false), 4, false, Some(FmaOrder::O231)),
        M::Vfnmadd231sd => (fma(true, false), 8, true, Some(FmaOrder::O231)),
        M::Vfnmadd231ss => (fma(true, false), 4, true, Some(FmaOrder::O231)),
        M::Vfnmsub132pd => (fma(true, true), 8, false, Some(FmaOrder::O132)),
        M::Vfnmsub132ps => (fma(true, true), 4, false, Some(FmaOrder::O132)),
        M::Vfnmsub132sd => (fma(true, true), 8, true, Some(FmaOrder::O132)),
        M::Vfnmsub132ss => (fma(true, true), 4, true, Some(FmaOrder::O132)),
        M::Vfnmsub213pd => (fma(true, true), 8, false, Some(FmaOrder::O213)),
        M::Vfnmsub213ps => (fma(true, true), 4, false, Some(FmaOrder::O213)),
        M::Vfnmsub213sd => (fma(true, true), 8, true, Some(FmaOrder::O213)),
        M::Vfnmsub213ss => (fma(true, true), 4, true, Some(FmaOrder::O213)),
        M::Vfnmsub231pd => (fma(true, true), 8, false, Some(FmaOrder::O231)),
        M::Vfnmsub231ps => (fma(true, true), 4, false, Some(FmaOrder::O231)),
        M::Vfnmsub231sd => (fma(true, true), 8, true, Some(FmaOrder::O231)),
        M::Vfnmsub231ss => (fma(true, true), 4, true, Some(FmaOrder::O231)),
        _ => return None,
    })
}

/// One element: `a op b` (FMA: `a·b + c` with its negations); None for a NaN in or out.
fn element(op: Op, e: usize, a: u64, b: u64, c: u64) -> Option<u64> {
    macro_rules! compute {
        ($t:ty, $from:expr, $to:expr) => {{
            let (x, y, z): ($t, $t, $t) = ($from(a), $from(b), $from(c));
            let inputs_nan = match op {
                Op::Sqrt => y.is_nan(),
                Op::Fma { .. } => x.is_nan() || y.is_nan() || z.is_nan(),
                _ => x.is_nan() || y.is_nan(),
            };
            if inputs_nan {
                return None;
            }
            let r: $t = match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul => x * y,
                Op::Div => x / y,
                // The CPU's rule: the second operand unless the first is strictly smaller
                // (larger), so min(0, -0) is -0 and min(-0, 0) is 0.
                Op::Min => {
                    if x < y {
                        x
                    } else {
                        y
                    }
                }
                Op::Max => {
                    if x > y {
                        x
                    } else {
                        y
                    }
                }
                Op::Sqrt => y.sqrt(),
                Op::Fma { negate_product, subtract } => {
                    let x = if negate_product { -x } else { x };
                    let z = if subtract { -z } else { z };
                    x.mul_add(y, z)
                }
            };
            if r.is_nan() { None } else { Some($to(r)) }
        }};
    }
    match e {
        8 => compute!(f64, f64::from_bits, |r: f64| r.to_bits()),
        4 => compute!(f32, |v: u64| f32::from_bits(v as u32), |r: f32| u64::from(r.to_bits())),
        _ => None,
    }
}

/// The exception flags one element's operation raises (every exception masked), given the
/// flags already set (`set`: a flag already set needs no telling); None where they cannot be
/// told exactly here (an FMA's inexactness, results in or next to the denormal range).
fn raised(op: Op, e: usize, a: u64, b: u64, c: u64, r: u64, set: u32) -> Option<u32> {
    macro_rules! flags {
        ($t:ty, $from:expr) => {{
            let (x, y, z, r): ($t, $t, $t, $t) = ($from(a), $from(b), $from(c), $from(r));
            let inputs: &[$t] = match op {
                Op::Sqrt => &[y],
                Op::Fma { .. } => &[x, y, z],
                _ => &[x, y],
            };
            let mut f = 0;
            if inputs.iter().any(|v| v.is_subnormal()) {
                f |= FLAG_DE;
            }
            if matches!(op, Op::Min | Op::Max) {
                return Some(f);
            }
            if inputs.iter().any(|v| v.is_infinite()) {
                // Infinite operands give exact results (the invalid ones are NaN: not here).
                return Some(f);
            }
            if op == Op::Div && y == 0.0 {
                // Divide-by-zero outranks a denormal dividend: the CPU flags it alone.
                return Some(FLAG_ZE);
            }
            if r.is_infinite() {
                return Some(f | FLAG_OE | FLAG_PE);
            }
            // Products, quotients and roots whose error term can itself underflow, and every
            // result near the denormal range: told only where both flags are set already.
            let safe = <$t>::MIN_POSITIVE * (2.0 as $t).powi(2 * <$t>::MANTISSA_DIGITS as i32);
            let tiny = r != 0.0 && r.abs() < safe;
            let tiny_inputs = inputs.iter().any(|v| *v != 0.0 && v.abs() < safe);
            let both = FLAG_UE | FLAG_PE;
            let inexact = match op {
                Op::Add | Op::Sub => {
                    // Sums are exact near the denormal range; elsewhere TwoSum's error term.
                    let y = if op == Op::Sub { -y } else { y };
                    let bb = r - x;
                    (x - (r - bb)) + (y - bb) != 0.0
                }
                _ if set & both == both => false,
                Op::Mul if x != 0.0 && y != 0.0 && r == 0.0 => return Some(f | both),
                Op::Div if x != 0.0 && r == 0.0 => return Some(f | both),
                _ if tiny || tiny_inputs => return None,
                // A zero from an FMA may be exact or an underflow: not told here.
                Op::Fma { .. } if r == 0.0 => return None,
                _ if set & FLAG_PE != 0 => false,
                Op::Mul => x.mul_add(y, -r) != 0.0,
                Op::Div => (-r).mul_add(y, x) != 0.0,
                Op::Sqrt => (-r).mul_add(r, y) != 0.0,
                _ => return None,
            };
            Some(if inexact { f | FLAG_PE } else { f })
        }};
    }
    match e {
        8 => flags!(f64, f64::from_bits),
        4 => flags!(f32, |v: u64| f32::from_bits(v as u32)),
        _ => None,
    }
}

impl Emu {
    /// Model a legacy SSE or VEX floating-point arithmetic instruction whose result the CPU
    /// computes as IEEE does (see the module doc); false when `i` is not one or the result
    /// cannot be known that way (before any effect).
    pub(super) fn vector_arith(&mut self, i: &Instruction, vex: bool) -> bool {
        let Some((op, e, scalar, order)) = arith_op(i.mnemonic()) else {
            return false;
        };
        // Whatever follows, the flags are this function's to tell: unknown unless it does.
        let flags_before = std::mem::replace(&mut self.mxcsr_flags_known, false);
        if i.op0_kind() != OpKind::Register || !is_vec(i.op0_register()) {
            return false;
        }
        // The exact results need the start-up MXCSR's control bits.
        if !matches!(self.mxcsr_now(), Some(csr) if csr & MXCSR_CONTROL == MXCSR_IEEE) {
            return false;
        }
        let d = i.op0_register();
        let w = if scalar { 16 } else { d.size() };
        let n = if scalar { 1 } else { w / e };
        let last = i.op_count() - 1;
        let mem_len = if scalar { e } else { w };
        if i.op_kind(last) == OpKind::Memory && i.memory_size().size() != mem_len {
            return false;
        }
        // Operands a (first source), b (second source, register or memory), c (FMA addend).
        let align = if !vex && !scalar { 16 } else { 1 };
        let Some(src) = self.vsrc(i, last, mem_len, align) else {
            return false;
        };
        let (a, b, c, keep) = match (order, vex, i.op_count()) {
            (Some(order), true, 3) => {
                let Some(dst) = self.vread(d, 16.max(w)) else { return false };
                let Some(s2) = self.vread(i.op1_register(), 16.max(w)) else {
                    return false;
                };
                let (a, b, c) = match order {
                    FmaOrder::O132 => (dst, src, s2),
                    FmaOrder::O213 => (s2, dst, src),
                    FmaOrder::O231 => (s2, src, dst),
                };
                (a, b, c, dst)
            }
            (None, true, 3) => {
                let Some(s1) = self.vread(i.op1_register(), 16.max(w)) else {
                    return false;
                };
                (s1, src, [0u8; 64], s1)
            }
            // VEX two-operand forms: the packed square roots.
            (None, true, 2) if op == Op::Sqrt && !scalar => (src, src, [0u8; 64], src),
            (None, false, 2) => {
                // Legacy SSE: the destination is the first source (scalar: its low element).
                let Some(dst) = self.vread(d, if scalar { e } else { w }) else {
                    return false;
                };
                (dst, src, [0u8; 64], dst)
            }
            _ => return false,
        };
        let mut out = keep;
        let set = self.mxcsr.unwrap_or(0);
        let mut flags = Some(0);
        for k in 0..n {
            let (x, y, z) = (elem(&a, k, e), elem(&b, k, e), elem(&c, k, e));
            let Some(r) = element(op, e, x, y, z) else {
                return false;
            };
            flags = flags.zip(raised(op, e, x, y, z, r, set)).map(|(f, g)| f | g);
            put_elem(&mut out, k, e, r);
        }
        if let Some(f) = flags {
            self.mxcsr = Some(set | f);
            self.mxcsr_flags_known = flags_before;
        }
        // Legacy SSE keeps every byte above what it writes (scalar: above the element; packed:
        // above the xmm register); VEX keeps the low 16 bytes of the first source above a
        // scalar and zeroes everything above 16 (scalar) or the vector's width.
        if scalar && !vex {
            self.vwrite_part(d.number(), 0, Some(&out[..e]), e);
        } else {
            self.vwrite(d.number(), Some(out), w, vex);
        }
        true
    }
}

impl Emu {
    /// `stmxcsr`/`ldmxcsr` (legacy and VEX): MXCSR to or from memory. False when `i` is
    /// neither or the loaded value would fault (reserved bits set) or is unknown.
    pub(super) fn mxcsr_move(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        match i.mnemonic() {
            M::Stmxcsr | M::Vstmxcsr => {
                let csr = self.mxcsr_now().filter(|_| self.mxcsr_flags_known);
                self.store(i, 0, 4, csr.map(u64::from));
                true
            }
            M::Ldmxcsr | M::Vldmxcsr => match self.operand(i, 0, 4) {
                Some(v) if v >> 16 == 0 => {
                    self.mxcsr_now();
                    self.mxcsr = Some(v as u32);
                    self.mxcsr_flags_known = true;
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }
}
