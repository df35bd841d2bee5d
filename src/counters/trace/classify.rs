//! What one decoded instruction does, statically: its floating-point work with
//! FP_ARITH_INST_RETIRED semantics, its explicit memory operands, its control flow.
//!
//! Intel's perfmon text for FP_ARITH_INST_RETIRED.{SCALAR,128B,256B,512B}_PACKED_{SINGLE,DOUBLE}
//! counts: ADD SUB HADD HSUB SUBADD MUL DIV MIN MAX SQRT, RSQRT/RCP (single, legacy forms),
//! RCP14/RSQRT14 (packed only), DPP and FM(N)ADD/SUB (those two count twice per element).
//! Comparisons, conversions, moves, logic, x87 and integer SIMD are not floating-point work.
//!
//! Beyond those events (`docs/mixed-precision.md`): AVX-512 FP16 complex FMA/multiply, the
//! bf16 and VNNI dot products (per 32-bit lane), and AMX tile operations, whose work depends
//! on the tile configuration in force and is counted per execution ([`TileOp`]).

use iced_x86::{FlowControl, Instruction, InstructionInfoFactory, MemorySize, Mnemonic, OpAccess, OpKind, Register, UsedMemory};

use crate::kernels::FlopClass;

/// The classes the trace can produce: the twelve width × precision classes of the FP events,
/// then bf16, int8 and int16 dot products per width, then the AMX tile classes.
pub const CLASSES: [FlopClass; 24] = [
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
    FlopClass::Packed128Bf16,
    FlopClass::Packed256Bf16,
    FlopClass::Packed512Bf16,
    FlopClass::Packed128Int8,
    FlopClass::Packed256Int8,
    FlopClass::Packed512Int8,
    FlopClass::Packed128Int16,
    FlopClass::Packed256Int16,
    FlopClass::Packed512Int16,
    FlopClass::TileBf16,
    FlopClass::TileFp16,
    FlopClass::TileInt8,
];

/// Number of [`CLASSES`].
pub const N_CLASSES: usize = CLASSES.len();

fn class_index(c: FlopClass) -> usize {
    CLASSES.iter().position(|x| *x == c).unwrap_or(0)
}

/// Floating-point (or integer dot-product) work of one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlopInfo {
    /// Index into [`CLASSES`].
    pub class: usize,
    /// Elements of the operation, as an opmask switches them (1 for scalar; 32-bit lanes for
    /// the dot products and the complex FP16 forms).
    pub lanes: u32,
    /// Operations per element: 2 for FMA and DPP, 4 for a bf16 or int16 pair dot product,
    /// 8 for an int8 quad or a complex FMA, 6 for a complex multiply, else 1.
    pub per_lane: u32,
    /// A fused multiply-add (real or complex): what runs only on a core's FMA pipes, so a
    /// point's compute roof depends on its share (`Flops::fma`).
    pub fma: bool,
}

impl FlopInfo {
    pub fn flops(&self) -> u64 {
        u64::from(self.lanes * self.per_lane)
    }
    /// Integer operations (VNNI), not flops.
    pub fn integer(&self) -> bool {
        CLASSES[self.class].is_integer()
    }
}

/// What an AMX instruction does with the tiles; its work and traffic come from the tile
/// configuration in force when it runs (read from the tracee's XSAVE area: [`TileConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileOp {
    /// `tdpbf16ps`, `tdpfp16ps`, `tdpb[su][su]d`, `tcmm{rl,im}fp16ps`: for each of the
    /// `rows(dst)` × `colsb(dst)/4` 32-bit results, `colsb(a)/4` dword groups of the A tile
    /// (bf16/fp16 pairs or int8 quads), each `per_k` operations (its products and their
    /// accumulations).
    Dot { class: usize, dst: u8, a: u8, per_k: u32 },
    /// `tileloadd`, `tileloaddt1`: `rows × colsb` bytes, one row per stride; `stack` as for
    /// [`MemOp::stack`] (compilers spill tiles to the stack).
    Load { tile: u8, stack: bool },
    /// `tilestored`.
    Store { tile: u8, stack: bool },
    /// `ldtilecfg`, `tilerelease`: the shapes change here.
    Configure,
    /// `tilezero`, `sttilecfg`: no work, shapes unchanged.
    Other,
}

impl TileOp {
    /// Whether its work or traffic depends on the shapes in force.
    pub fn shaped(self) -> bool {
        matches!(self, TileOp::Dot { .. } | TileOp::Load { .. } | TileOp::Store { .. })
    }
}

/// The AMX tile configuration (XSAVE component 17, XTILECFG; the `ldtilecfg` memory format):
/// palette, start row, and per tile register its bytes per row and rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TileConfig {
    pub palette: u8,
    pub start_row: u8,
    pub colsb: [u16; 8],
    pub rows: [u8; 8],
}

impl TileConfig {
    /// Parse the 64-byte format: byte 0 palette, 1 start_row, 16..32 colsb (u16 per tile),
    /// 48..56 rows (u8 per tile).
    pub fn parse(b: &[u8]) -> Option<TileConfig> {
        if b.len() < 64 {
            return None;
        }
        let mut c = TileConfig {
            palette: b[0],
            start_row: b[1],
            ..Default::default()
        };
        for t in 0..8 {
            c.colsb[t] = u16::from_le_bytes([b[16 + 2 * t], b[17 + 2 * t]]);
            c.rows[t] = b[48 + t];
        }
        Some(c)
    }

    /// The 64-byte format (what a program hands `ldtilecfg`).
    pub fn to_bytes(self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = self.palette;
        b[1] = self.start_row;
        for t in 0..8 {
            b[16 + 2 * t..18 + 2 * t].copy_from_slice(&self.colsb[t].to_le_bytes());
            b[48 + t] = self.rows[t];
        }
        b
    }

    /// (rows, bytes per row) of tile `t`; zero when no palette is in force (tiles unusable).
    pub fn shape(&self, t: u8) -> (u64, u64) {
        let t = usize::from(t & 7);
        if self.palette == 0 {
            return (0, 0);
        }
        (u64::from(self.rows[t]), u64::from(self.colsb[t]))
    }

    /// Operations of a tile dot product (see [`TileOp::Dot`]).
    pub fn dot_ops(&self, dst: u8, a: u8, per_k: u32) -> u64 {
        let (m, dst_colsb) = self.shape(dst);
        let (_, a_colsb) = self.shape(a);
        m * (dst_colsb / 4) * (a_colsb / 4) * u64::from(per_k)
    }

    /// Bytes a tile load or store moves: the rows from `start_row` on, `colsb` bytes each.
    pub fn moved_bytes(&self, tile: u8) -> u64 {
        let (rows, colsb) = self.shape(tile);
        rows.saturating_sub(u64::from(self.start_row)) * colsb
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
    /// AMX: counted per execution with the tile shapes in force (`Tally::add_tile`).
    pub tile: Option<TileOp>,
    /// Decoder could not classify it (invalid or unknown encoding).
    pub unclassified: bool,
    pub mask_writes: Vec<MaskWrite>,
    pub instr: Instruction,
}

impl Insn {
    pub fn next(&self) -> u64 {
        self.addr.wrapping_add(u64::from(self.len))
    }

    /// A `rep movs` or `rep stos` with 64-bit addressing: it runs exactly `rcx` iterations
    /// (a signal may interrupt it; it resumes where it was). Not `repe`/`repne` `cmps` and
    /// `scas`, which stop on a comparison, nor an address-size prefix (67h: `ecx`, `esi`, `edi`).
    pub fn repeats_rcx_times(&self) -> bool {
        let i = &self.instr;
        self.string.is_some_and(|s| s.rep)
            && matches!(
                i.mnemonic(),
                Mnemonic::Movsb
                    | Mnemonic::Movsw
                    | Mnemonic::Movsd
                    | Mnemonic::Movsq
                    | Mnemonic::Stosb
                    | Mnemonic::Stosw
                    | Mnemonic::Stosd
                    | Mnemonic::Stosq
            )
            && !i.has_repne_prefix()
            && (0..i.op_count()).all(|o| matches!(i.op_kind(o), OpKind::MemoryESRDI | OpKind::MemorySegRSI | OpKind::Register))
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

/// AMX tile register number of `r` (tmm0..tmm7).
fn tmm_index(r: Register) -> Option<u8> {
    let (lo, hi) = (Register::TMM0 as u32, Register::TMM7 as u32);
    (lo..=hi).contains(&(r as u32)).then(|| (r as u32 - lo) as u8)
}

/// What an AMX instruction does (None for any other instruction).
pub fn tile_op(i: &Instruction, rbp_is_frame: bool) -> Option<TileOp> {
    let stack = is_stack_base(i.memory_base(), rbp_is_frame);
    let tmm = |k: u32| tmm_index(i.op_register(k)).unwrap_or(0);
    let dot = |class: FlopClass, per_k: u32| TileOp::Dot {
        class: class_index(class),
        dst: tmm(0),
        a: tmm(1),
        per_k,
    };
    Some(match i.mnemonic() {
        // Per dword of a row of A: two bf16/fp16 products and two accumulations (the complex
        // forms: the real or imaginary part of one complex product, two products and two
        // accumulations), or four int8 products and four accumulations.
        Mnemonic::Tdpbf16ps => dot(FlopClass::TileBf16, 4),
        Mnemonic::Tdpfp16ps | Mnemonic::Tcmmimfp16ps | Mnemonic::Tcmmrlfp16ps => dot(FlopClass::TileFp16, 4),
        Mnemonic::Tdpbssd | Mnemonic::Tdpbsud | Mnemonic::Tdpbusd | Mnemonic::Tdpbuud => dot(FlopClass::TileInt8, 8),
        Mnemonic::Tileloadd | Mnemonic::Tileloaddt1 => TileOp::Load { tile: tmm(0), stack },
        Mnemonic::Tilestored => TileOp::Store { tile: tmm(1), stack },
        Mnemonic::Ldtilecfg | Mnemonic::Tilerelease => TileOp::Configure,
        Mnemonic::Tilezero | Mnemonic::Sttilecfg => TileOp::Other,
        _ => return None,
    })
}

/// The dot products of AVX-512 BF16, AVX-512 VNNI / AVX-VNNI (EVEX and VEX forms) and
/// AVX-VNNI-INT8/INT16: per 32-bit lane, two bf16 products and their accumulation (4), four
/// int8 products and their sums (8), two int16 products and their sums (4).
fn dot_product_info(mnemonic: &str, vector_bits: u32) -> Option<FlopInfo> {
    let (format, per_lane) = match mnemonic {
        "vdpbf16ps" => (0, 4),
        "vpdpbusd" | "vpdpbusds" | "vpdpbssd" | "vpdpbssds" | "vpdpbsud" | "vpdpbsuds" | "vpdpbuud" | "vpdpbuuds" => (1, 8),
        "vpdpwssd" | "vpdpwssds" | "vpdpwsud" | "vpdpwsuds" | "vpdpwusd" | "vpdpwusds" | "vpdpwuud" | "vpdpwuuds" => (2, 4),
        _ => return None,
    };
    let width = if vector_bits == 0 { 128 } else { vector_bits };
    let by_width = |c: [FlopClass; 3]| match width {
        128 => c[0],
        256 => c[1],
        _ => c[2],
    };
    let class = match format {
        0 => by_width([FlopClass::Packed128Bf16, FlopClass::Packed256Bf16, FlopClass::Packed512Bf16]),
        1 => by_width([FlopClass::Packed128Int8, FlopClass::Packed256Int8, FlopClass::Packed512Int8]),
        _ => by_width([FlopClass::Packed128Int16, FlopClass::Packed256Int16, FlopClass::Packed512Int16]),
    };
    Some(FlopInfo {
        class: class_index(class),
        lanes: width / 32,
        per_lane,
        fma: false,
    })
}

/// FP_ARITH_INST_RETIRED classification of a mnemonic.
pub fn flop_info(i: &Instruction) -> Option<FlopInfo> {
    let name = format!("{:?}", i.mnemonic()).to_ascii_lowercase();
    flop_info_of(&name, widest_vector(i))
}

/// Classification from a lower-case mnemonic and the widest vector operand (bits).
pub fn flop_info_of(mnemonic: &str, vector_bits: u32) -> Option<FlopInfo> {
    if let Some(d) = dot_product_info(mnemonic, vector_bits) {
        return Some(d);
    }
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
    // AVX-512 FP16 complex forms work on fp16 pairs (one complex number per 32-bit lane,
    // which is what the opmask switches): a complex FMA is four products and four sums, a
    // complex multiply four products and two sums.
    let complex = match stem {
        "fmaddc" | "fcmaddc" if elem_bits == 16 => Some(8),
        "fmulc" | "fcmulc" if elem_bits == 16 => Some(6),
        _ => None,
    };
    let per_lane = if let Some(c) = complex {
        c
    } else if fma {
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
    let lanes = if scalar {
        1
    } else if complex.is_some() {
        width / 32
    } else {
        width / elem_bits
    };
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
        fma: fma || matches!(stem, "fmaddc" | "fcmaddc"),
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
            tile: None,
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
    let tile = tile_op(i, rbp_is_frame);
    let mask = k_index(i.op_mask()).filter(|&k| k != 0);
    let string = string_op(i);
    let prefetch = name.starts_with("prefetch");
    let info = factory.info(i);
    let xsave_family = name.starts_with("xsave") || name.starts_with("xrstor") || name.starts_with("fxsave") || name.starts_with("fxrstor");
    let nt_store = name.starts_with("movnt") || name.starts_with("vmovnt") || name == "maskmovdqu" || name == "vmaskmovdqu";
    let mut mem = Vec::new();
    // Tile loads and stores move rows × colsb bytes of the shapes in force (`Tally::add_tile`),
    // not a fixed-size operand.
    let strided_tile = tile.is_some_and(TileOp::shaped);
    if string.is_none() && !prefetch && !strided_tile {
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
            if matches!(i.mnemonic(), Mnemonic::Ldtilecfg | Mnemonic::Sttilecfg) {
                size = 64;
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
    // An opmask matters to the counts only where it switches FP (or counted integer) lanes or
    // memory elements off: `vptestnmb ymm, ymm, k0{k1}` in glibc's EVEX string functions
    // counts the same whatever k1 holds, and a block without such instructions needs no
    // mask read at its entry (nor ends a run-ahead path).
    let mask = mask.filter(|_| flop.is_some() || mem.iter().any(|m| m.per_mask_element));
    Insn {
        addr,
        len,
        flow,
        flop,
        mask,
        mem,
        string,
        prefetch,
        tile,
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
        // What runs only on the FMA pipes (the point's mix roof): every fused form, real or
        // complex, and nothing else.
        for m in [
            "vfmadd231pd",
            "vfnmsub132ss",
            "vfmaddsub231ps",
            "vfmsubadd213pd",
            "vfmadd213sh",
            "vfmaddcph",
            "vfcmaddcph",
        ] {
            assert!(flop_info_of(m, 512).unwrap().fma, "{m}");
        }
        for m in ["vaddpd", "vmulps", "vdivsd", "vfmulcph", "vdpps", "vsqrtpd", "vmaxps", "vdpbf16ps"] {
            assert!(!flop_info_of(m, 512).unwrap().fma, "{m}");
        }
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

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    fn seed() -> u64 {
        0x9e37_79b9_7f4a_7c15
            ^ u64::from(std::process::id())
            ^ (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1))
    }

    /// Encode `i` with iced's encoder, decode the bytes back and classify them.
    fn encoded(i: &Instruction) -> Insn {
        let mut e = iced_x86::Encoder::new(64);
        e.encode(i, 0x1000).expect("encodable");
        one(&e.take_buffer())
    }

    /// What the instruction set reference's pseudocode does per 32-bit lane of a dot product:
    /// each product once, each addition into the lane once.
    fn reference_ops_per_lane(mnemonic: &str) -> (u64, u64) {
        match mnemonic {
            // two bf16 products, both added into the fp32 lane
            "vdpbf16ps" => (2, 2),
            // four u8×s8 products, their four sums into the dword
            "vpdpbusd" | "vpdpbssd" => (4, 4),
            // two s16×s16 products, two sums
            "vpdpwssd" | "vpdpwssds" => (2, 2),
            _ => unreachable!(),
        }
    }

    #[test]
    fn dot_products_count_per_active_32_bit_lane() {
        use iced_x86::{Code as C, Register as R};
        let zmm = |n: u64| [R::ZMM0, R::ZMM1, R::ZMM2, R::ZMM3, R::ZMM7, R::ZMM15, R::ZMM16, R::ZMM31][(n % 8) as usize];
        let ymm = |n: u64| [R::YMM0, R::YMM1, R::YMM5, R::YMM9, R::YMM15][(n % 5) as usize];
        let xmm = |n: u64| [R::XMM0, R::XMM3, R::XMM8, R::XMM14][(n % 4) as usize];
        let k = |n: u64| [R::K1, R::K2, R::K3, R::K4, R::K5, R::K6, R::K7][(n % 7) as usize];
        let mut s = seed();
        for _ in 0..300 {
            let (a, b, c, km, mask) = (
                xorshift(&mut s),
                xorshift(&mut s),
                xorshift(&mut s),
                xorshift(&mut s),
                xorshift(&mut s),
            );
            // (code, mnemonic, width, class, registers, EVEX)
            type Case = (C, &'static str, u32, FlopClass, [R; 3], bool);
            let cases: [Case; 7] = [
                (
                    C::EVEX_Vdpbf16ps_zmm_k1z_zmm_zmmm512b32,
                    "vdpbf16ps",
                    512,
                    FlopClass::Packed512Bf16,
                    [zmm(a), zmm(b), zmm(c)],
                    true,
                ),
                (
                    C::EVEX_Vpdpbusd_zmm_k1z_zmm_zmmm512b32,
                    "vpdpbusd",
                    512,
                    FlopClass::Packed512Int8,
                    [zmm(a), zmm(b), zmm(c)],
                    true,
                ),
                (
                    C::EVEX_Vpdpbusd_ymm_k1z_ymm_ymmm256b32,
                    "vpdpbusd",
                    256,
                    FlopClass::Packed256Int8,
                    [ymm(a), ymm(b), ymm(c)],
                    true,
                ),
                (
                    C::VEX_Vpdpbusd_ymm_ymm_ymmm256,
                    "vpdpbusd",
                    256,
                    FlopClass::Packed256Int8,
                    [ymm(a), ymm(b), ymm(c)],
                    false,
                ),
                (
                    C::EVEX_Vpdpwssd_zmm_k1z_zmm_zmmm512b32,
                    "vpdpwssd",
                    512,
                    FlopClass::Packed512Int16,
                    [zmm(a), zmm(b), zmm(c)],
                    true,
                ),
                (
                    C::VEX_Vpdpwssds_xmm_xmm_xmmm128,
                    "vpdpwssds",
                    128,
                    FlopClass::Packed128Int16,
                    [xmm(a), xmm(b), xmm(c)],
                    false,
                ),
                (
                    C::VEX_Vpdpbssd_ymm_ymm_ymmm256,
                    "vpdpbssd",
                    256,
                    FlopClass::Packed256Int8,
                    [ymm(a), ymm(b), ymm(c)],
                    false,
                ),
            ];
            for (code, name, width, class, [d, x, y], evex) in cases {
                let mut i = Instruction::with3(code, d, x, y).unwrap();
                let masked = evex && km % 3 != 0;
                if masked {
                    i.set_op_mask(k(km));
                }
                let insn = encoded(&i);
                let f = insn.flop.unwrap_or_else(|| panic!("{name} not classified"));
                assert_eq!(CLASSES[f.class], class, "{name}");
                let lanes = u64::from(width / 32);
                let (products, sums) = reference_ops_per_lane(name);
                assert_eq!(f.flops(), lanes * (products + sums), "{name} {width}");
                let mut t = crate::counters::trace::tally::Tally::default();
                t.add_insn(&insn, masked.then_some(mask));
                let active = if masked {
                    (mask & ((1u64 << lanes) - 1)).count_ones() as u64
                } else {
                    lanes
                };
                let want_effective = active * (products + sums);
                if class.is_integer() {
                    assert_eq!((t.int_ops_total(), t.flops_total()), (lanes * (products + sums), 0));
                    assert_eq!((t.effective_int, t.effective), (want_effective, 0), "{name} mask {mask:#x}");
                } else {
                    assert_eq!((t.flops_total(), t.int_ops_total()), (lanes * (products + sums), 0));
                    assert_eq!((t.effective, t.effective_int), (want_effective, 0), "{name} mask {mask:#x}");
                }
            }
        }
        // Bytes assembled by GNU as: EVEX and VEX forms, a memory operand.
        let vdp_mem = one(&[0x62, 0xf2, 0x76, 0x08, 0x52, 0x00]); // vdpbf16ps xmm0, xmm1, [rax]
        assert_eq!(
            (CLASSES[vdp_mem.flop.unwrap().class], vdp_mem.flop.unwrap().flops()),
            (FlopClass::Packed128Bf16, 16)
        );
        assert_eq!(vdp_mem.mem[0].bytes(), 16);
        let vex = one(&[0xc4, 0xe2, 0x75, 0x50, 0xc2]); // {vex} vpdpbusd ymm0, ymm1, ymm2
        assert_eq!(
            (CLASSES[vex.flop.unwrap().class], vex.flop.unwrap().flops(), vex.mask),
            (FlopClass::Packed256Int8, 64, None)
        );
    }

    #[test]
    fn fp16_fma_and_complex_forms() {
        use iced_x86::{Code as C, Register as R};
        let mut s = seed();
        for _ in 0..100 {
            let mask = xorshift(&mut s);
            let mut i = Instruction::with3(C::EVEX_Vfmadd231ph_zmm_k1z_zmm_zmmm512b16_er, R::ZMM0, R::ZMM1, R::ZMM2).unwrap();
            i.set_op_mask(R::K3);
            let x = encoded(&i);
            let mut t = crate::counters::trace::tally::Tally::default();
            t.add_insn(&x, Some(mask));
            // 32 fp16 lanes, a multiply and an add each; the mask switches fp16 lanes.
            assert_eq!((t.flops_total(), t.effective), (64, 2 * u64::from((mask as u32).count_ones())));
            let mut c = Instruction::with3(C::EVEX_Vfmaddcph_zmm_k1z_zmm_zmmm512b32_er, R::ZMM4, R::ZMM5, R::ZMM6).unwrap();
            c.set_op_mask(R::K2);
            let x = encoded(&c);
            let mut t = crate::counters::trace::tally::Tally::default();
            t.add_insn(&x, Some(mask));
            // 16 complex lanes: (a+bi)(c+di) added to the lane = 4 products + 4 sums each.
            assert_eq!((t.flops_total(), t.effective), (128, 8 * u64::from((mask as u16).count_ones())));
            assert_eq!(CLASSES[x.flop.unwrap().class], FlopClass::Packed512Half);
        }
        // vfcmulcsh xmm0, xmm1, xmm2: one complex product, 4 products + 2 sums.
        let m = one(&[0x62, 0xf6, 0x77, 0x08, 0xd7, 0xc2]);
        assert_eq!(
            (CLASSES[m.flop.unwrap().class], m.flop.unwrap().flops()),
            (FlopClass::ScalarHalf, 6)
        );
    }

    /// The pseudocode of TDPBF16PS/TDPFP16PS/TDPB[SU][SU]D (Intel intrinsics guide), counted:
    /// for each row m of dst, each dword k of a row of A, each dword column n of dst, the
    /// products of the pair (or quad) and their accumulations.
    fn reference_tile_ops(cfg: &TileConfig, dst: u8, a: u8, products_per_dword: u64) -> u64 {
        let mut ops = 0;
        let (rows, dst_colsb) = cfg.shape(dst);
        let (_, a_colsb) = cfg.shape(a);
        for _m in 0..rows {
            for _k in 0..a_colsb / 4 {
                for _n in 0..dst_colsb / 4 {
                    ops += products_per_dword; // the products
                    ops += products_per_dword; // each added into tmp.fp32[n] / tmp.dword[n]
                }
            }
        }
        ops
    }

    fn random_config(s: &mut u64) -> TileConfig {
        let mut c = TileConfig {
            palette: 1,
            ..Default::default()
        };
        for t in 0..8 {
            c.rows[t] = (xorshift(s) % 16 + 1) as u8;
            c.colsb[t] = ((xorshift(s) % 16 + 1) * 4) as u16;
        }
        c
    }

    #[test]
    fn amx_work_and_bytes_follow_the_tile_configuration() {
        use crate::counters::trace::tally::Tally;
        use iced_x86::{Code as C, Register as R};
        let tmm = |n: u64| [R::TMM0, R::TMM1, R::TMM2, R::TMM3, R::TMM4, R::TMM5, R::TMM6, R::TMM7][(n % 8) as usize];
        let mut s = seed();
        for _ in 0..200 {
            let cfg = random_config(&mut s);
            // Three distinct tiles (the same tile twice is #UD, and iced decodes it as invalid).
            let d = xorshift(&mut s) % 8;
            let a = (d + 1 + xorshift(&mut s) % 7) % 8;
            let b = (0..8)
                .cycle()
                .skip((xorshift(&mut s) % 8) as usize)
                .find(|t| *t != d && *t != a)
                .unwrap_or(0);
            for (code, class, products) in [
                (C::VEX_Tdpbf16ps_tmm_tmm_tmm, FlopClass::TileBf16, 2),
                (C::VEX_Tdpfp16ps_tmm_tmm_tmm, FlopClass::TileFp16, 2),
                (C::VEX_Tcmmrlfp16ps_tmm_tmm_tmm, FlopClass::TileFp16, 2),
                (C::VEX_Tdpbssd_tmm_tmm_tmm, FlopClass::TileInt8, 4),
                (C::VEX_Tdpbuud_tmm_tmm_tmm, FlopClass::TileInt8, 4),
            ] {
                let x = encoded(&Instruction::with3(code, tmm(d), tmm(a), tmm(b)).unwrap());
                assert!(!x.unclassified && x.flop.is_none() && x.mem.is_empty());
                let mut t = Tally::default();
                t.add_insn(&x, None);
                t.add_tile(&x, Some(&cfg));
                let want = reference_tile_ops(&cfg, d as u8, a as u8, products);
                let got = t.flops[class_index(class)];
                assert_eq!(got, want, "{code:?} cfg {cfg:?} dst {d} a {a}");
                if class.is_integer() {
                    assert_eq!((t.int_ops_total(), t.effective_int, t.flops_total()), (want, want, 0));
                } else {
                    assert_eq!((t.flops_total(), t.effective, t.int_ops_total()), (want, want, 0));
                }
                // Without a palette the tiles are unusable: nothing; unreadable: said so.
                let mut t = Tally::default();
                t.add_tile(&x, Some(&TileConfig::default()));
                assert_eq!(t.flops_total() + t.int_ops_total(), 0);
                t.add_tile(&x, None);
                assert_eq!(t.tile_unknown, 1);
            }
            // tileloadd tmm, [rsi+rdx*stride]: rows × colsb bytes; tilestored likewise.
            let mem = iced_x86::MemoryOperand::with_base_index_scale(R::RSI, R::RDX, 1);
            let ld = encoded(&Instruction::with2(C::VEX_Tileloadd_tmm_sibmem, tmm(d), mem).unwrap());
            let st = encoded(&Instruction::with2(C::VEX_Tilestored_sibmem_tmm, mem, tmm(a)).unwrap());
            let mut t = Tally::default();
            t.add_tile(&ld, Some(&cfg));
            t.add_tile(&st, Some(&cfg));
            let bytes = |n: u64| u64::from(cfg.rows[n as usize]) * u64::from(cfg.colsb[n as usize]);
            assert_eq!((t.core_load, t.core_store, t.stack), (bytes(d), bytes(a), 0));
            // A spill to the stack is stack traffic.
            let spill = encoded(
                &Instruction::with2(
                    C::VEX_Tilestored_sibmem_tmm,
                    iced_x86::MemoryOperand::with_base_index_scale(R::RSP, R::RAX, 1),
                    tmm(b),
                )
                .unwrap(),
            );
            let mut t = Tally::default();
            t.add_tile(&spill, Some(&cfg));
            assert_eq!((t.stack, t.core_store), (bytes(b), 0));
        }
    }

    #[test]
    fn amx_instructions_decode_to_their_tile_ops() {
        // Bytes assembled by GNU as 2.40 (and tcmmrlfp16ps by hand: VEX.128.NP.0F38.W0 6C).
        let tdp = one(&[0xc4, 0xe2, 0x6a, 0x5c, 0xc1]); // tdpbf16ps tmm0, tmm1, tmm2
        assert_eq!(
            tdp.tile,
            Some(TileOp::Dot {
                class: class_index(FlopClass::TileBf16),
                dst: 0,
                a: 1,
                per_k: 4
            })
        );
        let int8 = one(&[0xc4, 0xe2, 0x40, 0x5e, 0xc6]); // tdpbuud tmm0, tmm6, tmm7
        assert!(matches!(
            int8.tile,
            Some(TileOp::Dot {
                dst: 0,
                a: 6,
                per_k: 8,
                ..
            })
        ));
        let ld = one(&[0xc4, 0xe2, 0x7b, 0x4b, 0x0c, 0x16]); // tileloadd tmm1, [rsi+rdx]
        assert_eq!(ld.tile, Some(TileOp::Load { tile: 1, stack: false }));
        assert!(ld.mem.is_empty(), "tile rows are counted by add_tile, not as a fixed operand");
        let st = one(&[0xc4, 0xe2, 0x7a, 0x4b, 0x04, 0x0f]); // tilestored [rdi+rcx], tmm0
        assert_eq!(st.tile, Some(TileOp::Store { tile: 0, stack: false }));
        let cfg = one(&[0xc4, 0xe2, 0x78, 0x49, 0x00]); // ldtilecfg [rax]
        assert_eq!(cfg.tile, Some(TileOp::Configure));
        assert_eq!((cfg.mem[0].bytes(), cfg.mem[0].load), (64, true));
        let stcfg = one(&[0xc4, 0xe2, 0x79, 0x49, 0x44, 0x24, 0x40]); // sttilecfg [rsp+0x40]
        assert_eq!(stcfg.tile, Some(TileOp::Other));
        assert!(stcfg.mem[0].store && stcfg.mem[0].stack && stcfg.mem[0].bytes() == 64);
        assert_eq!(one(&[0xc4, 0xe2, 0x78, 0x49, 0xc0]).tile, Some(TileOp::Configure)); // tilerelease
        assert_eq!(one(&[0xc4, 0xe2, 0x7b, 0x49, 0xe0]).tile, Some(TileOp::Other)); // tilezero tmm4
        let cmm = one(&[0xc4, 0xe2, 0x68, 0x6c, 0xc1]);
        assert_eq!(cmm.instr.mnemonic(), Mnemonic::Tcmmrlfp16ps);
        assert!(matches!(cmm.tile, Some(TileOp::Dot { per_k: 4, .. })));
    }

    #[test]
    fn tile_configuration_layout_is_the_ldtilecfg_format() {
        // Written byte by byte as the SDM lays out the 64-byte operand of LDTILECFG.
        let mut b = [0u8; 64];
        b[0] = 1; // palette
        b[1] = 3; // start_row
        b[16] = 64; // tile 0: 64 bytes per row
        b[18] = 0x20; // tile 1: 32
        b[30] = 0x08; // tile 7: 8
        b[48] = 16; // tile 0: 16 rows
        b[49] = 5;
        b[55] = 2;
        let c = TileConfig::parse(&b).unwrap();
        assert_eq!((c.palette, c.start_row), (1, 3));
        assert_eq!(
            (c.shape(0), c.shape(1), c.shape(7), c.shape(3)),
            ((16, 64), (5, 32), (2, 8), (0, 0))
        );
        // Rows from start_row on (a restarted load).
        assert_eq!(c.moved_bytes(0), 13 * 64);
        assert_eq!(TileConfig::parse(&c.to_bytes()), Some(c));
        assert_eq!(TileConfig::parse(&b[..63]), None);
        // tdpbf16ps tmm0, tmm1, tmm7 with dst 16×(64/4) and A 5×32 bytes: 16·16·8 dword pairs.
        assert_eq!(c.dot_ops(0, 1, 4), 16 * 16 * 8 * 4);
    }

    #[test]
    fn invalid_bytes_are_unclassified() {
        let x = one(&[0x06]);
        assert!(x.unclassified);
        assert_eq!(x.flow, Flow::Stop);
    }
}
