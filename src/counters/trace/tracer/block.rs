//! Basic blocks: decoding, their static tally, how they exit (successors, returns, indirect
//! targets), opmask sources, and single-block loops (induction register, affine address registers).

use iced_x86::{InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use nix::libc;
use std::collections::HashMap;
use std::rc::Rc;

use crate::counters::trace::classify::{Flow, Insn, MaskWrite};
use crate::counters::trace::sources::Site;
use crate::counters::trace::tally::Tally;

/// Longest block decoded in one go (a block may be longer: it continues as the next block).
pub(super) const MAX_BLOCK: usize = 96;

/// Where the value an opmask has at a masked instruction comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum MaskSrc {
    Entry(u8),
    Const(u64),
    Dynamic,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum RspAt {
    Rsp(i64),
    Rbp(i64),
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Exit {
    Static,
    Ret(RspAt),
    /// Indirect jump/call whose target can be computed from the registers at block entry.
    Indirect {
        at_entry: bool,
    },
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Induction {
    pub(super) reg: Register,
    pub(super) stride: i64,
    pub(super) width32: bool,
}

#[derive(Debug)]
pub(super) struct Block {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) insns: Vec<Rc<Insn>>,
    pub(super) stat: Tally,
    pub(super) masked: Vec<(usize, MaskSrc)>,
    pub(super) needs_step: bool,
    /// `needs_step` only because a mask is written inside the block: the emulator may compute
    /// each masked instruction's mask from the registers at entry instead (flops mode).
    pub(super) emu_masks: bool,
    /// The `uid` of the last space that marked this block's static successors as block starts
    /// (marks are never taken back, so a path through the block need not mark them again;
    /// blocks are shared with forked children, whose marks are their own).
    pub(super) succ_marked: std::cell::Cell<u64>,
    /// The blocks run-ahead paths went on to from this one (`Space::next_block`), valid while
    /// `links_stamp` is the space's (`uid`, `block_gen`): no block was split since. A path
    /// looks up the next block at every block it runs through; the space's map was the cost.
    pub(super) links: std::cell::RefCell<Vec<(u64, std::rc::Weak<Block>)>>,
    pub(super) links_stamp: std::cell::Cell<(u64, u64)>,
    /// The run-ahead round that last went through this block (`Round::repeated`).
    pub(super) on_path_round: std::cell::Cell<u64>,
    /// Executions counted (at traps, on paths, by the code cache): what makes it hot.
    pub(super) hits: std::cell::Cell<u32>,
    pub(super) succ: Vec<u64>,
    pub(super) exit: Exit,
    pub(super) induction: Option<Induction>,
    /// Memory mode: the loop's address registers as functions of the iteration (see `affine_strides`).
    pub(super) affine: Option<Vec<Stride>>,
    pub(super) rep: bool,
    /// Where the block starts in the source (its function without `--by-function`).
    pub(super) site: Rc<Site>,
    /// `--by-function`: the block's static tally split by source site (instructions of one
    /// site in a row grouped), and each instruction's index into it. Empty otherwise.
    pub(super) sites: Vec<(Rc<Site>, Tally)>,
    pub(super) insn_site: Vec<u16>,
}

pub(super) fn full_gpr(r: Register) -> Register {
    r.full_register()
}

pub(super) fn reg_value(regs: &libc::user_regs_struct, r: Register) -> Option<u64> {
    use Register::*;
    Some(match full_gpr(r) {
        RAX => regs.rax,
        RBX => regs.rbx,
        RCX => regs.rcx,
        RDX => regs.rdx,
        RSI => regs.rsi,
        RDI => regs.rdi,
        RBP => regs.rbp,
        RSP => regs.rsp,
        R8 => regs.r8,
        R9 => regs.r9,
        R10 => regs.r10,
        R11 => regs.r11,
        R12 => regs.r12,
        R13 => regs.r13,
        R14 => regs.r14,
        R15 => regs.r15,
        RIP => regs.rip,
        _ => return Option::None,
    })
}

fn writes_of(insn: &Insn, factory: &mut InstructionInfoFactory) -> Vec<Register> {
    factory
        .info(&insn.instr)
        .used_registers()
        .iter()
        .filter(|u| {
            matches!(
                u.access(),
                OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
            )
        })
        .map(|u| full_gpr(u.register()))
        .collect()
}

/// The static tally of each instruction not counted per execution (masked ones are, through
/// `dynamic_tally`), grouped by source site: `(sites, the site index of each instruction)`.
fn split_by_site(insns: &[Rc<Insn>], sites: Vec<Rc<Site>>) -> (Vec<(Rc<Site>, Tally)>, Vec<u16>) {
    let mut groups: Vec<(Rc<Site>, Tally)> = Vec::new();
    let mut index = Vec::with_capacity(insns.len());
    for (insn, site) in insns.iter().zip(sites) {
        if !groups.last().is_some_and(|(s, _)| Rc::ptr_eq(s, &site)) {
            groups.push((site, Tally::default()));
        }
        index.push((groups.len() - 1) as u16);
        let t = &mut groups.last_mut().expect("pushed above").1;
        if insn.mask.is_none() {
            t.add_insn(insn, None);
            if insn.string.is_some_and(|s| !s.rep) {
                t.add_string(insn, 1);
            }
        }
    }
    (groups, index)
}

pub(super) fn build_block(
    start: u64,
    insns: Vec<Rc<Insn>>,
    site: Rc<Site>,
    sites: Vec<Rc<Site>>,
    factory: &mut InstructionInfoFactory,
) -> Block {
    let (sites, insn_site) = if sites.len() == insns.len() {
        split_by_site(&insns, sites)
    } else {
        (Vec::new(), Vec::new())
    };
    let end = insns.last().map(|i| i.next()).unwrap_or(start + 1);
    let body = scan_body(&insns);
    let (succ, exit) = match insns.last() {
        Some(l) => exits_of(&insns, l, end, factory),
        None => (Vec::new(), Exit::Static),
    };
    let (induction, affine) = counted_loop(start, &insns, &body, factory);
    Block {
        start,
        end,
        insns,
        stat: body.stat,
        masked: body.masked,
        needs_step: body.needs_step,
        emu_masks: body.needs_step && !body.tiles,
        succ_marked: std::cell::Cell::new(0),
        links: std::cell::RefCell::new(Vec::new()),
        links_stamp: std::cell::Cell::new((0, 0)),
        on_path_round: std::cell::Cell::new(0),
        hits: std::cell::Cell::new(0),
        succ,
        exit,
        induction,
        affine,
        rep: body.rep,
        site,
        sites,
        insn_site,
    }
}

/// What a block's instructions add to its static tally, and where its masked instructions'
/// opmasks come from (`build_block`).
struct BodyScan {
    stat: Tally,
    masked: Vec<(usize, MaskSrc)>,
    needs_step: bool,
    /// AMX work whose shapes are read at each tile instruction.
    tiles: bool,
    /// The opmasks some instruction of the block writes.
    kwritten: [bool; 8],
    rep: bool,
}

fn scan_body(insns: &[Rc<Insn>]) -> BodyScan {
    let mut stat = Tally::default();
    let mut masked = Vec::new();
    let mut needs_step = false;
    let mut tiles = false;
    let mut kstate: [MaskSrc; 8] = std::array::from_fn(|k| MaskSrc::Entry(k as u8));
    let mut kwritten = [false; 8];
    let mut rep = false;
    for (idx, insn) in insns.iter().enumerate() {
        // AMX work depends on the tile shapes in force: stepped, the configuration read at
        // each tile instruction (`step_one`).
        if insn.tile.is_some_and(|t| t.shaped()) {
            needs_step = true;
            tiles = true;
        }
        if let Some(k) = insn.mask {
            let src = kstate[k as usize];
            if src == MaskSrc::Dynamic {
                needs_step = true;
            }
            masked.push((idx, src));
        } else if insn.string.is_some_and(|s| s.rep) {
            rep = true;
            stat.add_insn(insn, None);
        } else {
            stat.add_insn(insn, None);
            if insn.string.is_some() {
                stat.add_string(insn, 1);
            }
        }
        for w in &insn.mask_writes {
            match *w {
                MaskWrite::Const(k, v) => {
                    kstate[k as usize] = MaskSrc::Const(v);
                    kwritten[k as usize] = true;
                }
                MaskWrite::Copy(d, s) => {
                    kstate[d as usize] = kstate[s as usize];
                    kwritten[d as usize] = true;
                }
                MaskWrite::Dynamic(k) => {
                    kstate[k as usize] = MaskSrc::Dynamic;
                    kwritten[k as usize] = true;
                }
            }
        }
    }
    BodyScan {
        stat,
        masked,
        needs_step,
        tiles,
        kwritten,
        rep,
    }
}

/// The static successors of a block of `insns` ending in `l` (the next instruction at `end`),
/// and how it exits.
fn exits_of(insns: &[Rc<Insn>], l: &Insn, end: u64, factory: &mut InstructionInfoFactory) -> (Vec<u64>, Exit) {
    let mut succ = Vec::new();
    let mut exit = Exit::Static;
    match l.flow {
        Flow::Next | Flow::Stop => succ.push(end),
        Flow::Jump(t) => succ.push(t),
        Flow::CondJump(t) | Flow::Call(t) => {
            succ.push(t);
            succ.push(end);
        }
        Flow::IndirectJump | Flow::IndirectCall => {
            if l.flow == Flow::IndirectCall {
                succ.push(end);
            }
            exit = Exit::Indirect {
                at_entry: indirect_target_at_entry(insns, l, factory),
            };
        }
        Flow::Return => exit = Exit::Ret(return_slot(insns, factory)),
    }
    (succ, exit)
}

/// Whether the target of the indirect jump or call `l` that ends `insns` is computable at the
/// block's entry: no earlier instruction writes the registers it reads.
fn indirect_target_at_entry(insns: &[Rc<Insn>], l: &Insn, factory: &mut InstructionInfoFactory) -> bool {
    let mut read: Vec<Register> = Vec::new();
    let i = &l.instr;
    for o in 0..i.op_count() {
        match i.op_kind(o) {
            OpKind::Register => read.push(full_gpr(i.op_register(o))),
            OpKind::Memory => {
                read.push(full_gpr(i.memory_base()));
                read.push(full_gpr(i.memory_index()));
            }
            _ => {}
        }
    }
    let clobbered = insns[..insns.len() - 1]
        .iter()
        .flat_map(|x| writes_of(x, factory))
        .any(|w| w != Register::None && read.contains(&w));
    !clobbered
}

/// Where the return address of the `ret` that ends `insns` lies, relative to rsp or rbp at the
/// block's entry, following what the instructions before it do to the two.
fn return_slot(insns: &[Rc<Insn>], factory: &mut InstructionInfoFactory) -> RspAt {
    let mut at = RspAt::Rsp(0);
    let mut rbp_written = false;
    for x in &insns[..insns.len() - 1] {
        let m = x.instr.mnemonic();
        let writes = writes_of(x, factory);
        let inc = x.instr.stack_pointer_increment() as i64;
        at = match (at, m) {
            (_, Mnemonic::Leave) => {
                if rbp_written {
                    RspAt::Unknown
                } else {
                    RspAt::Rbp(8)
                }
            }
            (RspAt::Rsp(d), Mnemonic::Add | Mnemonic::Sub)
                if x.instr.op0_register() == Register::RSP
                    && matches!(x.instr.op1_kind(), OpKind::Immediate8to64 | OpKind::Immediate32to64) =>
            {
                let v = x.instr.immediate(1) as i64;
                RspAt::Rsp(if m == Mnemonic::Add { d + v } else { d - v })
            }
            (RspAt::Rsp(d), Mnemonic::Lea)
                if x.instr.op0_register() == Register::RSP
                    && x.instr.memory_base() == Register::RSP
                    && x.instr.memory_index() == Register::None =>
            {
                RspAt::Rsp(d + x.instr.memory_displacement64() as i64)
            }
            (RspAt::Rsp(d), _) if inc != 0 => RspAt::Rsp(d + inc),
            (RspAt::Rbp(d), _) if inc != 0 => RspAt::Rbp(d + inc),
            (a, _) if writes.contains(&Register::RSP) => {
                let _ = a;
                RspAt::Unknown
            }
            (a, _) => a,
        };
        if writes.contains(&Register::RBP) && m != Mnemonic::Leave {
            rbp_written = true;
        }
    }
    at
}

/// A counted loop that is one block: `…; add r, imm; …; jcc start`, r written only there. Its
/// induction register, and in memory mode its address registers as functions of the iteration.
fn counted_loop(
    start: u64,
    insns: &[Rc<Insn>],
    body: &BodyScan,
    factory: &mut InstructionInfoFactory,
) -> (Option<Induction>, Option<Vec<Stride>>) {
    let mut induction = None;
    let mut affine = None;
    if let Some(l) = insns.last()
        && l.flow == Flow::CondJump(start)
        && !body.needs_step
        && !body.rep
        && body.masked.iter().all(|(_, s)| match s {
            MaskSrc::Entry(k) => !body.kwritten[*k as usize],
            MaskSrc::Const(_) => true,
            MaskSrc::Dynamic => false,
        })
    {
        let mut writers: HashMap<Register, Vec<usize>> = HashMap::new();
        for (idx, x) in insns.iter().enumerate() {
            for w in writes_of(x, factory) {
                writers.entry(w).or_default().push(idx);
            }
        }
        // The registers written once, in the program order of that write: with two counters
        // in one loop (an index and a pointer) the first is the induction, whatever order the
        // map iterates in (it differs from run to run, and a 32-bit counter that wraps gives
        // another trip count than a 64-bit one beside it).
        let mut written_once: Vec<(usize, Register)> = writers.iter().filter(|(_, ws)| ws.len() == 1).map(|(r, ws)| (ws[0], *r)).collect();
        written_once.sort_unstable();
        for (idx, reg) in written_once {
            if reg_value(&unsafe_zero_regs(), reg).is_none() || reg == Register::RSP || reg == Register::RIP {
                continue;
            }
            if let Some((stride, width32)) = stride_of(&insns[idx].instr, reg) {
                induction = Some(Induction { reg, stride, width32 });
                break;
            }
        }
        if induction.is_some() {
            affine = affine_strides(insns, &writers);
        }
    }
    (induction, affine)
}

/// The per-iteration stride of `reg` when `x` (its only writer in a loop) is `add/sub reg, imm`,
/// `inc/dec reg` or `lea reg, [reg+imm]`, and whether the write is 32-bit (zero-extending).
fn stride_of(x: &iced_x86::Instruction, reg: Register) -> Option<(i64, bool)> {
    let dst = x.op0_register();
    if x.op0_kind() != OpKind::Register || full_gpr(dst) != reg || !(dst.is_gpr64() || dst.is_gpr32()) {
        return None;
    }
    let stride = match x.mnemonic() {
        Mnemonic::Add | Mnemonic::Sub
            if x.op_count() == 2
                && matches!(
                    x.op1_kind(),
                    OpKind::Immediate8to64 | OpKind::Immediate32to64 | OpKind::Immediate8to32 | OpKind::Immediate32
                ) =>
        {
            let v = x.immediate(1) as i64;
            let v = if dst.is_gpr32() { v as i32 as i64 } else { v };
            if x.mnemonic() == Mnemonic::Add { v } else { -v }
        }
        Mnemonic::Inc => 1,
        Mnemonic::Dec => -1,
        Mnemonic::Lea if full_gpr(x.memory_base()) == reg && x.memory_index() == Register::None => x.memory_displacement64() as i64,
        _ => return None,
    };
    (stride != 0).then_some((stride, dst.is_gpr32()))
}

/// A register that addresses memory in a single-block loop, as a function of the iteration:
/// written once per iteration by instruction `writer` (`add/sub/inc/dec/lea` by `stride`), or
/// never (`stride` 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stride {
    pub(super) reg: Register,
    pub(super) stride: i64,
    pub(super) writer: usize,
    pub(super) width32: bool,
}

/// Memory mode's view of a single-block loop: when every register its memory operands use is
/// invariant or advanced once per iteration by a constant, the whole address stream follows from
/// the registers at its entry and its trip count (replayed at its exit, in program order).
/// None when one is not (a gather's vector index, a register loaded or computed in the loop,
/// string instructions): the loop then traps every iteration.
fn affine_strides(insns: &[Rc<Insn>], writers: &HashMap<Register, Vec<usize>>) -> Option<Vec<Stride>> {
    let mut regs: Vec<Register> = Vec::new();
    for x in insns {
        if x.string.is_some() {
            return None;
        }
        for m in &x.mem {
            if m.used.index().is_vector_register() {
                return None;
            }
            regs.push(full_gpr(m.used.base()));
            regs.push(full_gpr(m.used.index()));
        }
        if x.prefetch {
            regs.push(full_gpr(x.instr.memory_base()));
            regs.push(full_gpr(x.instr.memory_index()));
        }
    }
    regs.sort_by_key(|r| *r as u32);
    regs.dedup();
    let mut out = Vec::new();
    for r in regs {
        if r == Register::None || r == Register::RIP || r.is_segment_register() {
            continue;
        }
        reg_value(&unsafe_zero_regs(), r)?;
        match writers.get(&r) {
            None => out.push(Stride {
                reg: r,
                stride: 0,
                writer: usize::MAX,
                width32: false,
            }),
            Some(ws) if ws.len() == 1 => {
                let (stride, width32) = stride_of(&insns[ws[0]].instr, r)?;
                out.push(Stride {
                    reg: r,
                    stride,
                    writer: ws[0],
                    width32,
                });
            }
            _ => return None,
        }
    }
    Some(out)
}

fn unsafe_zero_regs() -> libc::user_regs_struct {
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Whether a block ends in a system call (or another instruction after which the kernel, not
/// the block, decides what comes next).
pub(super) fn ends_in_stop(block: &Block) -> bool {
    block.insns.last().is_some_and(|i| i.flow == Flow::Stop)
}

/// A block ending in `rt_sigreturn` (glibc's `__restore_rt`: `mov rax, 15; syscall`): the thread
/// goes on where its signal interrupted it, not after the `syscall`, so a path ending there has
/// no exit to predict (checking one reported every return from a signal handler as a
/// misprediction: 40 on a bash script that waits for its children).
pub(super) fn ends_in_sigreturn(block: &Block) -> bool {
    const RT_SIGRETURN: u64 = 15;
    let n = block.insns.len();
    if n < 2 || block.insns[n - 1].instr.mnemonic() != Mnemonic::Syscall {
        return false;
    }
    let m = &block.insns[n - 2].instr;
    m.mnemonic() == Mnemonic::Mov
        && m.op_count() == 2
        && matches!(m.op0_register(), Register::RAX | Register::EAX)
        && matches!(m.op1_kind(), OpKind::Immediate32to64 | OpKind::Immediate32)
        && m.immediate(1) == RT_SIGRETURN
}

/// The masked instructions of one block execution.
pub(super) fn dynamic_tally(block: &Block, masks: &[Option<u64>]) -> Tally {
    let mut t = Tally::default();
    for ((idx, _), m) in block.masked.iter().zip(masks.iter()) {
        t.add_insn(&block.insns[*idx], *m);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::trace::classify::classify;
    use iced_x86::{Decoder, DecoderOptions};

    fn block_of(bytes: &[u8]) -> Block {
        let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
        let mut f = InstructionInfoFactory::new();
        let mut v = Vec::new();
        while d.can_decode() {
            let i = d.decode();
            v.push(Rc::new(classify(&i, &mut f, false)));
        }
        build_block(0x1000, v, site("f", None), Vec::new(), &mut f)
    }

    fn site(function: &str, line: Option<&str>) -> Rc<Site> {
        Rc::new(Site {
            line: line.map(Rc::from),
            ..Site::symbol(Rc::from(function))
        })
    }

    /// `--by-function`: a block's tally split by source site adds up to the block's, and
    /// instructions of one site in a row are one group.
    #[test]
    fn sites_split_a_block_exactly() {
        // vaddpd ymm0,ymm0,[rdi+rax*8]; vmulpd ymm1,ymm1,[rsi+rax*8]; add rax,4; cmp rax,rsi; jb
        let bytes = [
            0xc5, 0xfd, 0x58, 0x04, 0xc7, 0xc5, 0xf5, 0x59, 0x0c, 0xc6, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xec,
        ];
        let mut d = Decoder::with_ip(64, &bytes, 0x1000, DecoderOptions::NONE);
        let mut f = InstructionInfoFactory::new();
        let mut v = Vec::new();
        while d.can_decode() {
            v.push(Rc::new(classify(&d.decode(), &mut f, false)));
        }
        let (a, b) = (site("closure", Some("src/main.rs:37")), site("helper", Some("mod.rs:470")));
        let per_insn = vec![a.clone(), b.clone(), b.clone(), a.clone(), a.clone()];
        let block = build_block(0x1000, v, a.clone(), per_insn, &mut f);
        assert_eq!(block.sites.len(), 3, "a, b b, a a");
        assert_eq!(block.insn_site, [0, 1, 1, 2, 2]);
        let mut sum = Tally::default();
        for (_, t) in &block.sites {
            sum.add_scaled(t, 1);
        }
        assert_eq!(sum.instructions, block.stat.instructions);
        assert_eq!(sum.flops_total(), block.stat.flops_total());
        assert_eq!(sum.core_load + sum.core_store, block.stat.core_load + block.stat.core_store);
        assert_eq!((block.sites[0].1.flops_total(), block.sites[1].1.flops_total()), (4, 4));
        assert!(Rc::ptr_eq(&block.sites[1].0, &b));
    }

    #[test]
    fn counted_loop_induction_found() {
        // 1000: vaddpd ymm0, ymm0, [rdi+rax*8]; add rax, 4; cmp rax, rsi; jb 1000
        let b = block_of(&[0xc5, 0xfd, 0x58, 0x04, 0xc7, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xf2]);
        assert_eq!(b.succ, vec![0x1000, b.end]);
        let ind = b.induction.expect("induction");
        assert_eq!((ind.reg, ind.stride, ind.width32), (Register::RAX, 4, false));
        assert_eq!(b.stat.flops_total(), 4);
        assert_eq!(b.stat.core_load, 32);
    }

    #[test]
    fn the_first_of_two_counters_is_the_induction_every_time() {
        // 1000: add rdi, 32; add rax, 4; cmp rax, rsi; jb 1000: rdi is written first.
        let code = [0x48, 0x83, 0xc7, 0x20, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xf3];
        for _ in 0..32 {
            let ind = block_of(&code).induction.expect("induction");
            assert_eq!((ind.reg, ind.stride), (Register::RDI, 32));
        }
    }

    #[test]
    fn loop_with_two_writers_is_not_counted_natively() {
        // 1000: add rax, 4; add rax, 1; cmp rax, rsi; jb 1000
        let b = block_of(&[0x48, 0x83, 0xc0, 0x04, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf0, 0x72, 0xf4]);
        assert!(b.induction.is_none());
    }

    #[test]
    fn ret_slot_tracks_pops_and_adds() {
        // add rsp, 8; pop rbx; ret
        let b = block_of(&[0x48, 0x83, 0xc4, 0x08, 0x5b, 0xc3]);
        assert_eq!(b.exit, Exit::Ret(RspAt::Rsp(16)));
        // leave; ret
        let b = block_of(&[0xc9, 0xc3]);
        assert_eq!(b.exit, Exit::Ret(RspAt::Rbp(8)));
    }

    #[test]
    fn dynamic_masks_need_stepping_constant_ones_do_not() {
        // kmovw k1, eax; vaddpd zmm0{k1}, zmm0, zmm1
        let b = block_of(&[0xc5, 0xf8, 0x92, 0xc8, 0x62, 0xf1, 0xfd, 0x49, 0x58, 0xc1]);
        assert!(b.needs_step);
        // kxnorw k1, k1, k1; vaddpd zmm0{k1}, zmm0, zmm1
        let b = block_of(&[0xc5, 0xf4, 0x46, 0xc9, 0x62, 0xf1, 0xfd, 0x49, 0x58, 0xc1]);
        assert!(!b.needs_step);
        assert_eq!(b.masked[0].1, MaskSrc::Const(0xffff));
        // vaddpd zmm0{k2}, zmm0, zmm1 with k2 from entry
        let b = block_of(&[0x62, 0xf1, 0xfd, 0x4a, 0x58, 0xc1]);
        assert_eq!(b.masked[0].1, MaskSrc::Entry(2));
        let t = dynamic_tally(&b, &[Some(0b1011)]);
        assert_eq!((t.flops_total(), t.effective), (8, 3));
        assert_eq!(crate::counters::trace::tally::active(0xff, 8), 8);
    }

    #[test]
    fn amx_blocks_are_stepped_vnni_loops_are_not() {
        // 1000: tileloadd tmm1, [rsi+rdx]; tdpbf16ps tmm0, tmm1, tmm2; add rsi, 64; cmp rsi, rdi; jb 1000
        let b = block_of(&[
            0xc4, 0xe2, 0x7b, 0x4b, 0x0c, 0x16, 0xc4, 0xe2, 0x6a, 0x5c, 0xc1, 0x48, 0x83, 0xc6, 0x40, 0x48, 0x39, 0xfe, 0x72, 0xec,
        ]);
        assert!(b.needs_step, "tile shapes are read at each tile instruction");
        assert!(b.induction.is_none());
        assert_eq!(b.stat.flops_total(), 0);
        // 1000: vpdpbusd zmm0, zmm1, zmm2; add rax, 4; cmp rax, rsi; jb 1000: a counted loop.
        let b = block_of(&[
            0x62, 0xf2, 0x75, 0x48, 0x50, 0xc2, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xf1,
        ]);
        assert!(!b.needs_step && b.induction.is_some());
        assert_eq!((b.stat.int_ops_total(), b.stat.flops_total()), (128, 0));
        // ldtilecfg alone changes shapes but does no shaped work: not stepped.
        let b = block_of(&[0xc4, 0xe2, 0x78, 0x49, 0x00, 0xc3]);
        assert!(!b.needs_step);
        assert_eq!(b.stat.core_load, 64);
    }
}
