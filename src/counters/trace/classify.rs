//! What one decoded instruction does, statically: its floating-point work with
//! FP_ARITH_INST_RETIRED semantics, its explicit memory operands, its control flow.
//!
//! Intel's perfmon text for FP_ARITH_INST_RETIRED.{SCALAR,128B,256B,512B}_PACKED_{SINGLE,DOUBLE}
//! counts: ADD SUB HADD HSUB SUBADD MUL DIV MIN MAX SQRT, RSQRT/RCP (single, legacy forms),
//! RCP14/RSQRT14 (packed only), DPP and FM(N)ADD/SUB (those two count twice per element).
//! Comparisons, conversions, moves, logic, x87 and integer SIMD are not floating-point work.

use iced_x86::{FlowControl, Instruction, InstructionInfoFactory, MemorySize, Mnemonic, OpAccess, OpKind, Register, UsedMemory};

use crate::kernels::FlopClass;

/// The classes the trace can produce (the twelve width × precision classes).
pub const CLASSES: [FlopClass; 12] = [
    FlopClass::ScalarDouble,
    FlopClass::Packed128Double,
    FlopClass::Packed256Double,
    FlopClass::Packed512Double,
    FlopClass::ScalarSingle,
    FlopClass::Packed128Single,
    FlopClass::Packed256Single,
    FlopClass::Packed512Single,
    FlopClass::ScalarHalf,
    FlopClass::Packed128Half,
    FlopClass::Packed256Half,
    FlopClass::Packed512Half,
];

fn class_index(c: FlopClass) -> usize {
    CLASSES.iter().position(|x| *x == c).unwrap_or(0)
}

/// Floating-point work of one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlopInfo {
    /// Index into [`CLASSES`].
    pub class: usize,
    /// Elements of the operation (1 for scalar).
    pub lanes: u32,
    /// Flops per element: 2 for FMA and DPP, else 1.
    pub per_lane: u32,
}

impl FlopInfo {
    pub fn flops(&self) -> u64 {
        u64::from(self.lanes * self.per_lane)
    }
}

/// Where control goes after an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Falls through; not a block end.
    Next,
    Jump(u64),
    CondJump(u64),
    Call(u64),
    IndirectJump,
    IndirectCall,
    Return,
    /// syscall/int/ud2/invalid/xbegin…: ends a block, continues (if at all) at the next address.
    Stop,
}

impl Flow {
    pub fn ends_block(self) -> bool {
        !matches!(self, Flow::Next)
    }
}

/// One explicit (or implicit stack) memory access of an instruction.
#[derive(Debug, Clone, PartialEq)]
pub struct MemOp {
    /// Bytes per element.
    pub elem: u32,
    /// Elements moved when no mask switches any off (1 for plain operands, the lane count
    /// for gathers/scatters and masked operands).
    pub elems: u32,
    pub load: bool,
    pub store: bool,
    /// Stack traffic (push/pop, call/ret, XSAVE family, rsp/rbp-relative): `bytes.stack`.
    pub stack: bool,
    pub nt: bool,
    /// Elements switched by the opmask register (`Insn::mask`).
    pub per_mask_element: bool,
    pub used: UsedMemory,
}

impl MemOp {
    pub fn bytes(&self) -> u64 {
        u64::from(self.elem) * u64::from(self.elems)
    }
}

/// A string instruction (movs/stos/lods/cmps/scas/ins/outs): bytes per iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StringOp {
    pub elem: u32,
    pub loads: u32,
    pub stores: u32,
    /// With a rep/repe/repne prefix: iterations come from rcx.
    pub rep: bool,
}

/// What writing an opmask register does, for the static mask evaluator of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskWrite {
    /// `kxnor k, k, k` (all ones), `kxor k, k, k` (zero), or a gather/scatter clearing its mask.
    Const(u8, u64),
    /// `kmov kd, ks`.
    Copy(u8, u8),
    /// Anything else: the value is known only at run time.
    Dynamic(u8),
}

/// Static facts about one instruction, decoded once per address.
#[derive(Debug, Clone)]
pub struct Insn {
    pub addr: u64,
    pub len: u32,
    pub flow: Flow,
    pub flop: Option<FlopInfo>,
    /// Opmask register k1..k7 switching lanes of this instruction off.
    pub mask: Option<u8>,
    pub mem: Vec<MemOp>,
    pub string: Option<StringOp>,
    pub prefetch: bool,
    /// Decoder could not classify it (invalid or unknown encoding).
    pub unclassified: bool,
    pub mask_writes: Vec<MaskWrite>,
    pub instr: Instruction,
}

impl Insn {
    pub fn next(&self) -> u64 {
        self.addr.wrapping_add(u64::from(self.len))
    }
}

/// Byte size of the XSAVE area (XSAVE family memory operands), from CPUID leaf 0xD.
fn xsave_area_bytes() -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: CPUID is available on every x86-64 CPU; leaf 0xD sub-leaf 0 is read-only.
        let r = std::arch::x86_64::__cpuid_count(0xd, 0);
        if r.ebx > 0 {
            return r.ebx;
        }
    }
    576
}

/// Vector register width in bits (0 when not a vector register).
fn vec_bits(r: Register) -> u32 {
    if r.is_zmm() {
        512
    } else if r.is_ymm() {
        256
    } else if r.is_xmm() {
        128
    } else {
        0
    }
}

fn widest_vector(i: &Instruction) -> u32 {
    (0..i.op_count())
        .filter(|&k| i.op_kind(k) == OpKind::Register)
        .map(|k| vec_bits(i.op_register(k)))
        .max()
        .unwrap_or(0)
}

/// FP_ARITH_INST_RETIRED classification of a mnemonic.
pub fn flop_info(i: &Instruction) -> Option<FlopInfo> {
    let name = format!("{:?}", i.mnemonic()).to_ascii_lowercase();
    flop_info_of(&name, widest_vector(i))
}

/// Classification from a lower-case mnemonic and the widest vector operand (bits).
pub fn flop_info_of(mnemonic: &str, vector_bits: u32) -> Option<FlopInfo> {
    let vex = mnemonic.starts_with('v');
    let op = if vex { &mnemonic[1..] } else { mnemonic };
    if op.len() < 3 {
        return None;
    }
    let (stem, suffix) = op.split_at(op.len() - 2);
    let (scalar, elem_bits, prec) = match suffix {
        "pd" => (false, 64, 0),
        "ps" => (false, 32, 1),
        "ph" => (false, 16, 2),
        "sd" => (true, 64, 0),
        "ss" => (true, 32, 1),
        "sh" => (true, 16, 2),
        _ => return None,
    };
    let fma = ["fmadd", "fmsub", "fnmadd", "fnmsub", "fmaddsub", "fmsubadd"].iter().any(|f| {
        stem.strip_prefix(f)
            .is_some_and(|rest| rest.is_empty() || matches!(rest, "132" | "213" | "231"))
    });
    let per_lane = if fma {
        2
    } else {
        match stem {
            "add" | "sub" | "mul" | "div" | "min" | "max" | "sqrt" => 1,
            "hadd" | "hsub" | "addsub" if !scalar => 1,
            // Legacy approximations exist in single precision only.
            "rcp" | "rsqrt" if elem_bits == 32 => 1,
            // The perfmon text lists RCP14/RSQRT14 for packed classes only.
            "rcp14" | "rsqrt14" if !scalar => 1,
            "dp" if !scalar => 2,
            _ => return None,
        }
    };
    let width = if scalar {
        64
    } else if vector_bits == 0 {
        128
    } else {
        vector_bits
    };
    let lanes = if scalar { 1 } else { width / elem_bits };
    let class = match (prec, scalar, width) {
        (0, true, _) => FlopClass::ScalarDouble,
        (0, false, 128) => FlopClass::Packed128Double,
        (0, false, 256) => FlopClass::Packed256Double,
        (0, false, _) => FlopClass::Packed512Double,
        (1, true, _) => FlopClass::ScalarSingle,
        (1, false, 128) => FlopClass::Packed128Single,
        (1, false, 256) => FlopClass::Packed256Single,
        (1, false, _) => FlopClass::Packed512Single,
        (_, true, _) => FlopClass::ScalarHalf,
        (_, false, 128) => FlopClass::Packed128Half,
        (_, false, 256) => FlopClass::Packed256Half,
        _ => FlopClass::Packed512Half,
    };
    Some(FlopInfo {
        class: class_index(class),
        lanes,
        per_lane,
    })
}

fn string_op(i: &Instruction) -> Option<StringOp> {
    if !i.is_string_instruction() {
        return None;
    }
    let name = format!("{:?}", i.mnemonic()).to_ascii_lowercase();
    let elem = match name.as_bytes().last() {
        Some(b'b') => 1,
        Some(b'w') => 2,
        Some(b'd') => 4,
        Some(b'q') => 8,
        _ => return None,
    };
    let (loads, stores) = match &name[..name.len() - 1] {
        "movs" => (1, 1),
        "stos" => (0, 1),
        "lods" => (1, 0),
        "cmps" => (2, 0),
        "scas" => (1, 0),
        "ins" => (0, 1),
        "outs" => (1, 0),
        _ => return None,
    };
    Some(StringOp {
        elem,
        loads,
        stores,
        rep: i.has_rep_prefix() || i.has_repne_prefix(),
    })
}

fn k_index(r: Register) -> Option<u8> {
    if (Register::K0 as u32..=Register::K7 as u32).contains(&(r as u32)) {
        Some((r as u32 - Register::K0 as u32) as u8)
    } else {
        None
    }
}

fn mask_writes(i: &Instruction, info_regs: &[iced_x86::UsedRegister]) -> Vec<MaskWrite> {
    let mut out = Vec::new();
    let m = i.mnemonic();
    let is_gs = {
        let n = format!("{m:?}").to_ascii_lowercase();
        n.starts_with("vgather") || n.starts_with("vscatter")
    };
    if is_gs {
        if let Some(k) = k_index(i.op_mask()) {
            out.push(MaskWrite::Const(k, 0));
        }
        return out;
    }
    for r in info_regs {
        let Some(k) = k_index(r.register()) else { continue };
        if !matches!(
            r.access(),
            OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
        ) {
            continue;
        }
        let srcs: Vec<Register> = (1..i.op_count())
            .filter(|&o| i.op_kind(o) == OpKind::Register)
            .map(|o| i.op_register(o))
            .collect();
        let same = srcs.len() == 2 && srcs[0] == srcs[1];
        let w = match m {
            Mnemonic::Kxnorb | Mnemonic::Kxnorw | Mnemonic::Kxnord | Mnemonic::Kxnorq if same => {
                let bits = match m {
                    Mnemonic::Kxnorb => 8,
                    Mnemonic::Kxnorw => 16,
                    Mnemonic::Kxnord => 32,
                    _ => 64,
                };
                MaskWrite::Const(k, if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 })
            }
            Mnemonic::Kxorb | Mnemonic::Kxorw | Mnemonic::Kxord | Mnemonic::Kxorq if same => MaskWrite::Const(k, 0),
            Mnemonic::Kmovb | Mnemonic::Kmovw | Mnemonic::Kmovd | Mnemonic::Kmovq
                if i.op_count() == 2 && i.op_kind(1) == OpKind::Register && k_index(i.op_register(1)).is_some() =>
            {
                MaskWrite::Copy(k, k_index(i.op_register(1)).unwrap_or(0))
            }
            _ => MaskWrite::Dynamic(k),
        };
        out.push(w);
    }
    out
}

/// Whether an explicit operand addressed off rsp (or rbp where it is a frame pointer) is stack traffic.
fn is_stack_base(base: Register, rbp_is_frame: bool) -> bool {
    matches!(base, Register::RSP | Register::ESP | Register::SP) || (rbp_is_frame && matches!(base, Register::RBP | Register::EBP))
}

/// Classify a decoded instruction. `rbp_is_frame`: the containing function sets up rbp as a
/// frame pointer, so rbp-relative operands are spills (stack), not array accesses.
pub fn classify(i: &Instruction, factory: &mut InstructionInfoFactory, rbp_is_frame: bool) -> Insn {
    let addr = i.ip();
    let len = i.len() as u32;
    if i.is_invalid() {
        return Insn {
            addr,
            len: len.max(1),
            flow: Flow::Stop,
            flop: None,
            mask: None,
            mem: vec![],
            string: None,
            prefetch: false,
            unclassified: true,
            mask_writes: vec![],
            instr: *i,
        };
    }
    let flow = match i.flow_control() {
        FlowControl::Next => Flow::Next,
        FlowControl::UnconditionalBranch => match i.op0_kind() {
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => Flow::Jump(i.near_branch_target()),
            _ => Flow::IndirectJump,
        },
        FlowControl::ConditionalBranch => match i.op0_kind() {
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => Flow::CondJump(i.near_branch_target()),
            _ => Flow::Stop,
        },
        FlowControl::Call => match i.op0_kind() {
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => Flow::Call(i.near_branch_target()),
            _ => Flow::Stop, // syscall, sysenter
        },
        FlowControl::IndirectBranch => Flow::IndirectJump,
        FlowControl::IndirectCall => Flow::IndirectCall,
        FlowControl::Return => Flow::Return,
        _ => Flow::Stop,
    };
    let mut flow = flow;
    let name = format!("{:?}", i.mnemonic()).to_ascii_lowercase();
    // The register-indirect far forms and `ret imm` are still returns; keep them.
    if matches!(
        i.mnemonic(),
        Mnemonic::Syscall | Mnemonic::Sysenter | Mnemonic::Int | Mnemonic::Int3 | Mnemonic::Ud2
    ) {
        flow = Flow::Stop;
    }
    let flop = flop_info(i);
    let mask = k_index(i.op_mask()).filter(|&k| k != 0);
    let string = string_op(i);
    let prefetch = name.starts_with("prefetch");
    let info = factory.info(i);
    let xsave_family = name.starts_with("xsave") || name.starts_with("xrstor") || name.starts_with("fxsave") || name.starts_with("fxrstor");
    let nt_store = name.starts_with("movnt") || name.starts_with("vmovnt") || name == "maskmovdqu" || name == "vmaskmovdqu";
    let mut mem = Vec::new();
    if string.is_none() && !prefetch {
        for m in info.used_memory() {
            let acc = m.access();
            let (load, store) = match acc {
                OpAccess::Read | OpAccess::CondRead => (true, false),
                OpAccess::Write | OpAccess::CondWrite => (false, true),
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => (true, true),
                _ => continue,
            };
            let ms = m.memory_size();
            let mut size = ms.size() as u32;
            if xsave_family && size == 0 {
                size = xsave_area_bytes();
            }
            if size == 0 {
                continue;
            }
            let stack = xsave_family || is_stack_base(m.base(), rbp_is_frame);
            let (elem, elems, per_mask_element) = if m.index().is_vector_register() {
                // Gather/scatter: one element per active lane of min(data lanes, index lanes).
                let elem = ms.element_size().max(1) as u32;
                let data_bits = widest_vector(i);
                let idx_bits = vec_bits(m.index());
                let vs = m.vsib_size().max(1) * 8;
                let lanes = (data_bits / (elem * 8)).min(idx_bits / vs).max(1);
                (elem, lanes, mask.is_some())
            } else if mask.is_some() && !ms.is_broadcast() && ms != MemorySize::Unknown {
                let elem = ms.element_size().max(1) as u32;
                (elem, (size / elem).max(1), true)
            } else {
                (size, 1, false)
            };
            mem.push(MemOp {
                elem,
                elems,
                load,
                store,
                stack,
                nt: nt_store && store,
                per_mask_element,
                used: *m,
            });
        }
    }
    let mask_writes = mask_writes(i, info.used_registers());
    Insn {
        addr,
        len,
        flow,
        flop,
        mask,
        mem,
        string,
        prefetch,
        unclassified: false,
        mask_writes,
        instr: *i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    fn one(bytes: &[u8]) -> Insn {
        let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
        let i = d.decode();
        classify(&i, &mut InstructionInfoFactory::new(), false)
    }

    #[test]
    fn fma_counts_two_per_lane_and_width_from_register() {
        // vfmadd231pd zmm0{k1}, zmm1, [rax]{1to8}
        let x = one(&[0x62, 0xf2, 0xf5, 0x59, 0xb8, 0x00]);
        let f = x.flop.unwrap();
        assert_eq!(CLASSES[f.class], FlopClass::Packed512Double);
        assert_eq!(f.flops(), 16);
        assert_eq!(x.mask, Some(1));
        // Broadcast: one 8-byte element, not per mask element.
        assert_eq!(x.mem.len(), 1);
        assert_eq!(x.mem[0].bytes(), 8);
        assert!(!x.mem[0].per_mask_element);
    }

    #[test]
    fn documented_set_of_fp_arith_instructions() {
        assert_eq!(flop_info_of("vsqrtsd", 128).unwrap().flops(), 1);
        assert_eq!(flop_info_of("maxps", 128).unwrap().flops(), 4);
        assert_eq!(flop_info_of("vdpps", 256).unwrap().flops(), 16);
        assert_eq!(flop_info_of("vrcp14pd", 512).unwrap().flops(), 8);
        assert!(flop_info_of("vrcp14sd", 128).is_none(), "scalar RCP14 is not in the perfmon text");
        assert!(flop_info_of("rcppd", 128).is_none());
        assert_eq!(flop_info_of("rsqrtss", 128).unwrap().flops(), 1);
        assert_eq!(flop_info_of("haddpd", 128).unwrap().flops(), 2);
        assert!(flop_info_of("movsd", 128).is_none());
        assert!(flop_info_of("vcmppd", 256).is_none());
        assert!(flop_info_of("vcvtpd2ps", 256).is_none());
        assert!(flop_info_of("pminsd", 128).is_none());
        assert_eq!(flop_info_of("vfnmsub132ss", 128).unwrap().flops(), 2);
        assert_eq!(flop_info_of("vfmaddsub231ps", 256).unwrap().flops(), 16);
        assert_eq!(flop_info_of("vaddph", 512).unwrap().flops(), 32);
    }

    #[test]
    fn stack_and_string_and_prefetch_and_nt() {
        let push = one(&[0x53]);
        assert!(push.mem[0].stack && push.mem[0].store && push.mem[0].bytes() == 8);
        let ret = one(&[0xc3]);
        assert_eq!(ret.flow, Flow::Return);
        assert!(ret.mem[0].stack && ret.mem[0].load);
        let rep = one(&[0xf3, 0x48, 0xab]);
        assert_eq!(
            rep.string,
            Some(StringOp {
                elem: 8,
                loads: 0,
                stores: 1,
                rep: true
            })
        );
        let pf = one(&[0x0f, 0x18, 0x08]);
        assert!(pf.prefetch && pf.mem.is_empty());
        let nt = one(&[0x0f, 0x2b, 0x00]);
        assert!(nt.mem[0].nt && nt.mem[0].bytes() == 16 && !nt.mem[0].stack);
        let xs = one(&[0x0f, 0xae, 0x24, 0x24]);
        assert!(xs.mem[0].stack && xs.mem[0].bytes() >= 512);
    }

    #[test]
    fn gathers_count_per_element() {
        // vgatherdpd zmm1{k1}, [rax+ymm2*8]: 8 elements of 8 bytes, masked, clears k1.
        let g = one(&[0x62, 0xf2, 0xfd, 0x49, 0x92, 0x0c, 0xd0]);
        assert_eq!((g.mem[0].elem, g.mem[0].elems), (8, 8));
        assert!(g.mem[0].per_mask_element);
        assert_eq!(g.mask_writes, vec![MaskWrite::Const(1, 0)]);
        // AVX2 vgatherdpd ymm1, [rax+xmm2*8], ymm3: 4 elements.
        let g2 = one(&[0xc4, 0xe2, 0xe5, 0x92, 0x0c, 0xd0]);
        assert_eq!((g2.mem[0].elem, g2.mem[0].elems), (8, 4));
    }

    #[test]
    fn rbp_relative_is_stack_only_with_a_frame_pointer() {
        // mov rax, [rbp-8]
        let b = [0x48, 0x8b, 0x45, 0xf8];
        let mut d = Decoder::with_ip(64, &b, 0, DecoderOptions::NONE);
        let i = d.decode();
        let mut f = InstructionInfoFactory::new();
        assert!(classify(&i, &mut f, true).mem[0].stack);
        assert!(!classify(&i, &mut f, false).mem[0].stack);
    }

    #[test]
    fn invalid_bytes_are_unclassified() {
        let x = one(&[0x06]);
        assert!(x.unclassified);
        assert_eq!(x.flow, Flow::Stop);
    }
}
