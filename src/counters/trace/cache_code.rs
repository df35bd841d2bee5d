//! The code cache's translations (flops mode; `ROOFLINE_TRACE_CACHE=0` turns it off): a hot block
//! copied into a cache area of the tracee with a counter increment in front, its direct exits
//! jumping to other translations or to exit stubs, and its returns and indirect branches
//! looking their target up in a table in the tracee. What this file builds is bytes (iced-x86's
//! `BlockEncoder` relocates RIP-relative operands and branches); `tracer/cache.rs` places them.
//!
//! A translation of the block `insns`, placed at `at`:
//! - **counter**: `add qword gs:[counter], 1`: one 8-byte counter per translation in each
//!   thread's own counter area, whose address the tracer puts in the thread's `gs` base
//!   (unused by Linux x86-64 programs; a space whose threads use it gets no cache), so that a
//!   flush counts each thread's executions as its own and no `lock` is needed. Where the
//!   block writes every status flag before reading any, the add goes first as it is; elsewhere it is wrapped in `pushfq`/`popfq` below the red zone
//!   (`lea rsp,[rsp-128]` first), so the flags the block reads are the program's.
//! - **body**: the block's instructions but its last branch, relocated. Before each masked
//!   instruction whose work or bytes depend on its opmask: the active lanes of the mask
//!   (`kmov` into `rax`, `popcnt`) added to a counter of their own (`gs:[counter + 8k]`, the
//!   `k`-th such instruction), `rax` and the flags saved below the red zone; the tracer counts
//!   the instruction as its tally with no lane active per execution plus one lane's share per
//!   lane counted.
//! - **direct exits** (fall-through, `jcc` both ways, `jmp`, `call`): a `jmp` to the target's
//!   translation where it exists, else to an **exit stub**: five `int3`. The tracer handles the
//!   trap (the thread goes to the original target, as if it had arrived there) and may later
//!   *link* the stub: the four bytes after its first `int3` become a rel32 and then the first
//!   byte `0xe9` (`jmp`), the breakpoint technique in reverse; a thread that had already
//!   trapped there is recognised by the stub's range. A `call` pushes the original return
//!   address (as the displaced copies do: `lea rsp,[rsp-8]; mov [rsp],lo; mov [rsp+4],hi`).
//! - **`ret`, `jmp r/m64`, `call r/m64`**: the target is loaded into `rcx` (saved, with `rdx`
//!   and the flags, below the red zone) and looked up in the space's table (direct-mapped by
//!   the low bits of the address, 8 bytes per entry: a translation, whose code is preceded by the original address it translates, compared; the table's address is in the area's
//!   header). A hit writes the translation's address into a slot 136 bytes below the original
//!   `rsp`, restores `rdx`, `rcx`, the flags, and ends with `ret N`, which jumps there and puts
//!   `rsp` where the original instruction would have left it (`N` = 136 + imm for `ret`, 128
//!   for `jmp`, 120 for `call`, after it wrote the original return address). A miss restores
//!   everything and traps in a **miss stub**: the thread is exactly before the original branch.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Instruction, InstructionBlock, MemoryOperand, Mnemonic, OpKind, Register, RflagsBits,
};

use super::classify::{Flow, Insn};

/// One cache area: its header, then code.
pub const AREA_SIZE: u64 = 1 << 20;
/// Bytes of an area before its code: the lookup table's address (8 bytes), padded.
pub const HEADER: u64 = 64;
/// Buckets of the lookup table (a power of two), each of `WAYS` entries of 8 bytes: a
/// translation's address (0: none). A translation's code is preceded by the original address
/// it translates (`ORIGIN`), which the lookup compares, so that an entry can be replaced by one
/// 8-byte write while other threads look it up: whatever they read is a whole translation.
pub const TABLE_BUCKETS: u64 = 1 << TABLE_BITS;
/// 2²¹ buckets (32 MiB, reserved like the counters): a million translations (PyTorch) leave
/// about 3 % of them outside the table (a bucket's third and later), 2²⁰ about 10 %.
const TABLE_BITS: u32 = 21;
/// Entries per bucket: a target whose bucket holds another translation is found in the other
/// way, so that two hot targets sharing a bucket do not leave one of them to a trap per lookup.
pub const WAYS: u64 = 2;
/// Bytes of the lookup table.
pub const TABLE_BYTES: u64 = TABLE_BUCKETS * WAYS * 8;
/// The multiplier of the table's hash (2⁶⁴/φ, odd): the product's top bits, which pick the
/// bucket, depend on every bit of the address, the low ones included (a 32-bit multiplier
/// leaves addresses a few KiB apart in one bucket).
const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// The bucket of original address `addr`: the top `TABLE_BITS` bits of `addr · HASH_MUL`, as
/// the lookup computes them. Not the address's low bits: code is laid out in power-of-two
/// strides (a library's functions 256 KiB apart shared a slot of a table indexed by them).
pub fn table_bucket(addr: u64) -> u64 {
    addr.wrapping_mul(HASH_MUL) >> (64 - TABLE_BITS)
}

/// Bytes before a translation's code: the original address.
pub const ORIGIN: u64 = 8;
/// Bytes of one exit stub (`int3` × 5, linked into a `jmp rel32`).
pub const STUB_LEN: u64 = 5;
const INT3: u8 = 0xcc;

/// Where a translation's stub sends the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// To this original address (a direct exit).
    Direct(u64),
    /// A return or indirect branch whose target was not in the table: the thread is before the
    /// original instruction at this address.
    Miss(u64),
}

/// A translation's bytes, its stubs (offset, where each leads) and its length.
#[derive(Debug, Clone)]
pub struct Translated {
    pub bytes: Vec<u8>,
    pub stubs: Vec<(u64, ExitKind)>,
}

/// The lanes whose active count a masked instruction's work and bytes depend on: `Some(None)`
/// where they depend on no lane (a masked compare into an opmask: its tally is one per
/// execution), `Some(Some(l))` where the flops and every masked memory operand count the
/// active ones of `l` lanes, None where they count different lane numbers or `l` cannot be
/// read with one `kmov` (then the block is not translated).
pub fn masked_lanes(i: &Insn) -> Option<Option<u32>> {
    i.mask?;
    let mut lanes: Option<u32> = None;
    let flop = i.flop.map(|f| f.lanes);
    let mem = i.mem.iter().filter(|m| m.per_mask_element).map(|m| m.elems);
    for l in flop.into_iter().chain(mem) {
        if lanes.is_some_and(|x| x != l) || !(1..=16).contains(&l) && l != 32 && l != 64 {
            return None;
        }
        lanes = Some(l);
    }
    Some(lanes)
}

/// The masked instructions of `insns` whose active lanes are counted, in order, with their
/// lanes: the `k`-th has the counter after the block's own plus `k + 1`.
pub fn lane_counted(insns: &[std::rc::Rc<Insn>]) -> Vec<(usize, u32)> {
    insns
        .iter()
        .enumerate()
        .filter_map(|(idx, i)| Some((idx, masked_lanes(i)??)))
        .collect()
}

/// Whether a block of these instructions can be translated: no system call or other stop, no
/// string, tile or unclassified instruction (their counts are dynamic), masked instructions
/// only where their active lanes can be counted (`masked_lanes`), and an end this file knows
/// how to translate.
pub fn translatable(insns: &[std::rc::Rc<Insn>]) -> bool {
    let Some(last) = insns.last() else { return false };
    for i in insns {
        if (i.string.is_some() && !rep_countable(i))
            || i.tile.is_some()
            || i.unclassified
            || (i.mask.is_some() && masked_lanes(i).is_none())
            || writes_gs(&i.instr)
        {
            return false;
        }
    }
    match last.flow {
        Flow::Stop => false,
        Flow::CondJump(_) => last.instr.is_jcc_short_or_near(),
        Flow::Jump(_) => last.instr.is_jmp_short_or_near(),
        Flow::Call(_) => last.instr.is_call_near(),
        Flow::Return => matches!(last.instr.code(), Code::Retnq | Code::Retnq_imm16),
        Flow::IndirectJump => last.instr.code() == Code::Jmp_rm64 && indirect_operand_ok(&last.instr),
        Flow::IndirectCall => last.instr.code() == Code::Call_rm64 && indirect_operand_ok(&last.instr),
        Flow::Next => true,
    }
}

/// Whether `i` is a string instruction whose iterations its translation counts: one that
/// repeats `rcx` times (`Insn::repeats_rcx_times`: `rep movs`, `rep stos`) on flat segments.
/// Its bytes are its element times those iterations, which a counter of its own adds up
/// (`rep_count_add`). `repe`/`repne` `cmps` and `scas` end where the data says and stay out
/// of the cache.
pub fn rep_countable(i: &Insn) -> bool {
    i.repeats_rcx_times() && matches!(i.instr.segment_prefix(), Register::None | Register::DS | Register::ES)
}

/// The rep-counted string instructions of `insns` (`rep_countable`), in order: the `j`-th has
/// the counter after the block's own, its lane counters (`lane_counted`) and `j`.
pub fn rep_counted(insns: &[std::rc::Rc<Insn>]) -> Vec<usize> {
    insns
        .iter()
        .enumerate()
        .filter(|(_, i)| rep_countable(i))
        .map(|(idx, _)| idx)
        .collect()
}

/// Whether `ins` changes the `gs` base, which holds the thread's counter area while it runs
/// translations: such a block runs outside them, where the tracer sees the new base at the
/// thread's next entry (and gives the space no more cache).
fn writes_gs(ins: &Instruction) -> bool {
    match ins.mnemonic() {
        Mnemonic::Wrgsbase | Mnemonic::Lgs | Mnemonic::Swapgs => true,
        Mnemonic::Mov | Mnemonic::Pop => ins.op0_kind() == OpKind::Register && ins.op0_register() == Register::GS,
        _ => false,
    }
}

/// An indirect branch's operand can be loaded into `rcx` after `rsp` moved by 160: a register
/// other than rsp, or memory whose index is not rsp and whose segment has base 0. The load
/// drops the prefix: in 64-bit mode `cs`, `ds`, `es` and `ss` address flat memory, and `ds` is
/// also CET's `notrack` (3E), which every jump table of a program built with `-fcf-protection`
/// (Ubuntu's and Fedora's default) carries; `fs` and `gs` have bases of their own.
fn indirect_operand_ok(ins: &Instruction) -> bool {
    match ins.op0_kind() {
        OpKind::Register => ins.op0_register() != Register::RSP,
        OpKind::Memory => {
            ins.memory_index() != Register::RSP
                && matches!(
                    ins.segment_prefix(),
                    Register::None | Register::CS | Register::DS | Register::ES | Register::SS
                )
        }
        _ => false,
    }
}

/// Whether the counter's `add` may clobber the flags at the block's start: some instruction
/// writes every status flag before any instruction reads one.
fn flags_dead_at_start(insns: &[std::rc::Rc<Insn>]) -> bool {
    let all = RflagsBits::OF | RflagsBits::SF | RflagsBits::ZF | RflagsBits::AF | RflagsBits::CF | RflagsBits::PF;
    for i in insns {
        if i.instr.rflags_read() != 0 {
            return false;
        }
        // A shift or rotate by a count of 0 leaves the flags as they were: not a writer.
        let shifts = matches!(
            i.instr.mnemonic(),
            Mnemonic::Shl
                | Mnemonic::Shr
                | Mnemonic::Sar
                | Mnemonic::Sal
                | Mnemonic::Rol
                | Mnemonic::Ror
                | Mnemonic::Rcl
                | Mnemonic::Rcr
                | Mnemonic::Shld
                | Mnemonic::Shrd
        );
        let written = i.instr.rflags_written() | i.instr.rflags_cleared() | i.instr.rflags_set() | i.instr.rflags_undefined();
        if !shifts && written & all == all {
            return true;
        }
    }
    false
}

fn op(r: Result<Instruction, iced_x86::IcedError>) -> Option<Instruction> {
    let mut i = r.ok()?;
    i.set_ip(0);
    Some(i)
}

fn mem(base: Register, displ: i64) -> MemoryOperand {
    MemoryOperand::with_base_displ(base, displ)
}

/// Counters per thread: a thread's counter area (`gs` base, set by the tracer) has room for this
/// many 8-byte counters, one per translation of its space (and one per lane or string
/// counter). 128 MiB of address space per thread, reserved, not committed: a page is made when a
/// counter on it is first written, so a thread's memory grows with the translations it runs.
/// 2¹⁸ ran out importing PyTorch (263 000 translations in `import torch` alone); every block
/// first hot after that was run by traps.
pub const THREAD_COUNTERS: u64 = 1 << 24;

/// `add qword gs:[counter], 1` (`counter`: the translation's offset in its thread's counter
/// area), with the flags saved around it unless `flags_dead`.
fn counter_increment(counter: u64, flags_dead: bool, seq: &mut Vec<Instruction>) -> Option<()> {
    let at = MemoryOperand::new(
        Register::None,
        Register::None,
        1,
        i64::try_from(counter).ok()?,
        4,
        false,
        Register::GS,
    );
    let add = op(Instruction::with2(Code::Add_rm64_imm8, at, 1i32))?;
    if flags_dead {
        seq.push(add);
        return Some(());
    }
    seq.push(op(Instruction::with2(Code::Lea_r64_m, Register::RSP, mem(Register::RSP, -128)))?);
    seq.push(op(Ok(Instruction::with(Code::Pushfq)))?);
    seq.push(add);
    seq.push(op(Ok(Instruction::with(Code::Popfq)))?);
    seq.push(op(Instruction::with2(Code::Lea_r64_m, Register::RSP, mem(Register::RSP, 128)))?);
    Some(())
}

/// Before a masked instruction: the number of active lanes of its opmask `k` (the low `lanes`
/// bits) added to its thread's counter at `slot`, every register and flag kept (`rax` and the
/// flags saved below the red zone). The instruction has not run yet, so a mask it writes itself
/// (`vpcmpb k1{k1}, …`) is read as it switches the instruction's lanes.
fn active_lanes_add(k: u8, lanes: u32, slot: u64, seq: &mut Vec<Instruction>) -> Option<()> {
    use Register::*;
    let kreg = [K0, K1, K2, K3, K4, K5, K6, K7].get(usize::from(k)).copied()?;
    seq.push(op(Instruction::with2(Code::Lea_r64_m, RSP, mem(RSP, -128)))?);
    seq.push(op(Instruction::with1(Code::Push_r64, RAX))?);
    seq.push(op(Ok(Instruction::with(Code::Pushfq)))?);
    // kmovd/kmovq need AVX512BW, which every instruction of 32 or 64 lanes (bytes, words,
    // fp16) needs too; kmovw is AVX512F.
    match lanes {
        64 => seq.push(op(Instruction::with2(Code::VEX_Kmovq_r64_kr, RAX, kreg))?),
        32 => seq.push(op(Instruction::with2(Code::VEX_Kmovd_r32_kr, EAX, kreg))?),
        1..=16 => {
            seq.push(op(Instruction::with2(Code::VEX_Kmovw_r32_kr, EAX, kreg))?);
            if lanes < 16 {
                seq.push(op(Instruction::with2(Code::And_rm32_imm32, EAX, (1u32 << lanes) - 1))?);
            }
        }
        _ => return Option::None,
    }
    seq.push(op(Instruction::with2(Code::Popcnt_r64_rm64, RAX, RAX))?);
    let at = MemoryOperand::new(Register::None, Register::None, 1, i64::try_from(slot).ok()?, 4, false, GS);
    seq.push(op(Instruction::with2(Code::Add_rm64_r64, at, RAX))?);
    seq.push(op(Ok(Instruction::with(Code::Popfq)))?);
    seq.push(op(Instruction::with1(Code::Pop_r64, RAX))?);
    seq.push(op(Instruction::with2(Code::Lea_r64_m, RSP, mem(RSP, 128)))?);
    Some(())
}

/// Before a rep-counted string instruction (`rep_countable`): its iterations, `rcx`, added to
/// its thread's counter at `slot`, the flags kept (saved below the red zone). Counted at its
/// start: a signal handler that runs while it is under way returns into it, which goes on
/// with what is left of `rcx`.
fn rep_count_add(slot: u64, seq: &mut Vec<Instruction>) -> Option<()> {
    use Register::*;
    seq.push(op(Instruction::with2(Code::Lea_r64_m, RSP, mem(RSP, -128)))?);
    seq.push(op(Ok(Instruction::with(Code::Pushfq)))?);
    let at = MemoryOperand::new(Register::None, Register::None, 1, i64::try_from(slot).ok()?, 4, false, GS);
    seq.push(op(Instruction::with2(Code::Add_rm64_r64, at, RCX))?);
    seq.push(op(Ok(Instruction::with(Code::Popfq)))?);
    seq.push(op(Instruction::with2(Code::Lea_r64_m, RSP, mem(RSP, 128)))?);
    Some(())
}

/// Labels of stubs are fake instruction addresses, below any real code, that the encoder
/// retargets branches to.
struct Labels {
    next: u64,
    stubs: Vec<(u64, ExitKind)>,
}

impl Labels {
    /// Five `int3`, the first labelled; returns the label.
    fn stub(&mut self, kind: ExitKind, seq: &mut Vec<Instruction>) -> u64 {
        self.next += 1;
        let label = self.next;
        for k in 0..STUB_LEN {
            let mut i = Instruction::with(Code::Int3);
            i.set_ip(if k == 0 { label } else { 0 });
            seq.push(i);
        }
        self.stubs.push((label, kind));
        label
    }
}

/// The translation of `insns` (one block, decoded at their addresses) placed at `at`.
/// `counter`: its counter's offset in a thread's counter area (the active-lane counters of
/// its masked instructions, `lane_counted`, follow it, then the iteration counters of its
/// `rep movs`/`rep stos`, `rep_counted`); `table_ptr`: the address holding the lookup table's
/// address (in the area's header); `translated(x)`: the translation of the original address
/// `x`, where one exists. None where the block cannot be translated.
pub fn translate(
    insns: &[std::rc::Rc<Insn>],
    at: u64,
    counter: u64,
    table_ptr: u64,
    translated: &dyn Fn(u64) -> Option<u64>,
) -> Option<Translated> {
    if !translatable(insns) {
        return None;
    }
    let last = insns.last()?;
    let mut seq: Vec<Instruction> = Vec::new();
    counter_increment(counter, flags_dead_at_start(insns), &mut seq)?;
    let branch_last = last.flow != Flow::Next;
    let body = if branch_last { &insns[..insns.len() - 1] } else { insns };
    // The body's instructions lose their addresses: the encoder sends a branch or RIP-relative
    // operand whose target is the address of an instruction of the block to that
    // instruction's copy, and a body has no branch, so such a target is data (a function
    // taking its own address, `lea rax,[rip+f]` at `f`): it must stay the original address.
    let lanes = lane_counted(insns);
    let reps = rep_counted(insns);
    for (idx, i) in body.iter().enumerate() {
        if let Some(k) = lanes.iter().position(|(at, _)| *at == idx) {
            let slot = counter.checked_add(8 * (k as u64 + 1))?;
            active_lanes_add(i.mask?, lanes[k].1, slot, &mut seq)?;
        }
        if let Some(j) = reps.iter().position(|at| *at == idx) {
            let slot = counter.checked_add(8 * ((lanes.len() + j) as u64 + 1))?;
            rep_count_add(slot, &mut seq)?;
        }
        let mut c = i.instr;
        c.set_ip(0);
        seq.push(c);
    }
    let mut labels = Labels {
        next: 0,
        stubs: Vec::new(),
    };
    // Direct exits after the body: a jump to a translation, or to a stub made after the code.
    let mut pending: Vec<(usize, u64)> = Vec::new();
    let jump_to = |x: u64, seq: &mut Vec<Instruction>, code: Code, pending: &mut Vec<(usize, u64)>| -> Option<()> {
        let mut j = op(Instruction::with_branch(code, translated(x).unwrap_or(1)))?;
        j.set_ip(0);
        if translated(x).is_none() {
            pending.push((seq.len(), x));
        }
        seq.push(j);
        Some(())
    };
    let ret = last.next();
    match last.flow {
        Flow::Next => jump_to(ret, &mut seq, Code::Jmp_rel32_64, &mut pending)?,
        Flow::CondJump(t) => {
            jump_to(t, &mut seq, last.instr.code(), &mut pending)?;
            jump_to(ret, &mut seq, Code::Jmp_rel32_64, &mut pending)?;
        }
        Flow::Jump(t) => jump_to(t, &mut seq, Code::Jmp_rel32_64, &mut pending)?,
        Flow::Call(t) => {
            push_return(ret, &mut seq)?;
            jump_to(t, &mut seq, Code::Jmp_rel32_64, &mut pending)?;
        }
        Flow::Return | Flow::IndirectJump | Flow::IndirectCall => lookup(&last.instr, table_ptr, &mut seq, &mut labels)?,
        Flow::Stop => return None,
    }
    for (idx, x) in pending {
        let label = labels.stub(ExitKind::Direct(x), &mut seq);
        seq[idx].set_near_branch64(label);
    }
    let block = InstructionBlock::new(&seq, at);
    let r = BlockEncoder::encode(64, block, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS).ok()?;
    let mut stubs = Vec::new();
    for (label, kind) in labels.stubs {
        let idx = seq.iter().position(|i| i.ip() == label && i.code() == Code::Int3)?;
        let off = u64::from(*r.new_instruction_offsets.get(idx)?);
        if off == u64::from(u32::MAX) || r.code_buffer.get(off as usize..(off + STUB_LEN) as usize)? != [INT3; STUB_LEN as usize] {
            return None;
        }
        stubs.push((off, kind));
    }
    Some(Translated {
        bytes: r.code_buffer,
        stubs,
    })
}

/// `lea rsp,[rsp-8]; mov dword [rsp],lo; mov dword [rsp+4],hi`: the original return address
/// pushed without touching the flags.
fn push_return(ret: u64, seq: &mut Vec<Instruction>) -> Option<()> {
    seq.push(op(Instruction::with2(Code::Lea_r64_m, Register::RSP, mem(Register::RSP, -8)))?);
    seq.push(op(Instruction::with2(
        Code::Mov_rm32_imm32,
        MemoryOperand::with_base(Register::RSP),
        ret as u32,
    ))?);
    seq.push(op(Instruction::with2(
        Code::Mov_rm32_imm32,
        mem(Register::RSP, 4),
        (ret >> 32) as u32,
    ))?);
    Some(())
}

/// Below the original rsp while looking up: the jump slot at -136, saved rcx, rdx, flags.
const SAVED: i64 = 160;

/// The table lookup for a return or indirect branch `ins` (see the module's description).
fn lookup(ins: &Instruction, table_ptr: u64, seq: &mut Vec<Instruction>, labels: &mut Labels) -> Option<()> {
    use Register::*;
    seq.push(op(Instruction::with2(Code::Lea_r64_m, RSP, mem(RSP, -136)))?);
    seq.push(op(Instruction::with1(Code::Push_r64, RCX))?);
    seq.push(op(Instruction::with1(Code::Push_r64, RDX))?);
    seq.push(op(Ok(Instruction::with(Code::Pushfq)))?);
    // The target into rcx (rcx and rdx still hold the program's values; rsp moved by 160).
    let (ret_imm, call_ret) = match ins.code() {
        Code::Retnq | Code::Retnq_imm16 => {
            seq.push(op(Instruction::with2(Code::Mov_r64_rm64, RCX, mem(RSP, SAVED)))?);
            let imm = if ins.code() == Code::Retnq_imm16 {
                u32::from(ins.immediate16())
            } else {
                0
            };
            (136 + imm, Option::None)
        }
        Code::Jmp_rm64 | Code::Call_rm64 => {
            match ins.op0_kind() {
                OpKind::Register => {
                    let r = ins.op0_register();
                    if r != RCX {
                        seq.push(op(Instruction::with2(Code::Mov_r64_rm64, RCX, r))?);
                    }
                }
                OpKind::Memory => {
                    let base = ins.memory_base();
                    let mut displ = ins.memory_displacement64() as i64;
                    if base == RSP {
                        displ = displ.wrapping_add(SAVED);
                    }
                    // A RIP-relative operand keeps its absolute target (the displacement).
                    let m = MemoryOperand::new(base, ins.memory_index(), ins.memory_index_scale(), displ, 8, false, Register::None);
                    seq.push(op(Instruction::with2(Code::Mov_r64_rm64, RCX, m))?);
                }
                _ => return Option::None,
            }
            if ins.code() == Code::Jmp_rm64 {
                (128, Option::None)
            } else {
                (120, Some(ins.next_ip()))
            }
        }
        _ => return Option::None,
    };
    labels.next += 1;
    let miss = labels.next;
    labels.next += 1;
    let hit = labels.next;
    labels.next += 1;
    let second = labels.next;
    for way in 0..WAYS {
        let first = seq.len();
        bucket_address(table_ptr, seq)?;
        if way > 0 {
            seq[first].set_ip(second);
        }
        seq.push(op(Instruction::with2(Code::Mov_r64_rm64, RDX, mem(RDX, (8 * way) as i64)))?);
        seq.push(op(Instruction::with2(Code::Test_rm64_r64, RDX, RDX))?);
        let next = if way + 1 < WAYS { second } else { miss };
        seq.push(op(Instruction::with_branch(Code::Je_rel32_64, next))?);
        seq.push(op(Instruction::with2(Code::Cmp_r64_rm64, RCX, mem(RDX, -(ORIGIN as i64))))?);
        if way + 1 < WAYS {
            seq.push(op(Instruction::with_branch(Code::Je_rel32_64, hit))?);
        } else {
            seq.push(op(Instruction::with_branch(Code::Jne_rel32_64, miss))?);
        }
    }
    let mut store = op(Instruction::with2(Code::Mov_rm64_r64, mem(RSP, 24), RDX))?;
    store.set_ip(hit);
    seq.push(store);
    if let Some(r) = call_ret {
        seq.push(op(Instruction::with2(Code::Mov_rm32_imm32, mem(RSP, SAVED - 8), r as u32))?);
        seq.push(op(Instruction::with2(Code::Mov_rm32_imm32, mem(RSP, SAVED - 4), (r >> 32) as u32))?);
    }
    seq.push(op(Ok(Instruction::with(Code::Popfq)))?);
    seq.push(op(Instruction::with1(Code::Pop_r64, RDX))?);
    seq.push(op(Instruction::with1(Code::Pop_r64, RCX))?);
    seq.push(op(Instruction::with1(Code::Retnq_imm16, ret_imm))?);
    let mut popf = Instruction::with(Code::Popfq);
    popf.set_ip(miss);
    seq.push(popf);
    seq.push(op(Instruction::with1(Code::Pop_r64, RDX))?);
    seq.push(op(Instruction::with1(Code::Pop_r64, RCX))?);
    seq.push(op(Instruction::with2(Code::Lea_r64_m, RSP, mem(RSP, 136)))?);
    labels.stub(ExitKind::Miss(ins.ip()), seq);
    Some(())
}

/// `rdx` = the address of `rcx`'s bucket: `table_bucket(rcx)` × the bucket's bytes + the
/// table's address (read from `table_ptr`). Flags clobbered.
fn bucket_address(table_ptr: u64, seq: &mut Vec<Instruction>) -> Option<()> {
    use Register::*;
    seq.push(op(Instruction::with2(Code::Mov_r64_imm64, RDX, HASH_MUL))?);
    seq.push(op(Instruction::with2(Code::Imul_r64_rm64, RDX, RCX))?);
    seq.push(op(Instruction::with2(Code::Shr_rm64_imm8, RDX, 64 - TABLE_BITS))?);
    seq.push(op(Instruction::with2(Code::Shl_rm64_imm8, RDX, (WAYS * 8).trailing_zeros()))?);
    seq.push(op(Instruction::with2(Code::Add_r64_rm64, RDX, mem(RIP, table_ptr as i64)))?);
    Some(())
}

/// The bytes that link an exit stub at `stub` to `to`: written in two steps, the rel32 behind
/// the first `int3` first, then the opcode over it. None when `to` is out of rel32 reach.
pub fn link_bytes(stub: u64, to: u64) -> Option<([u8; 4], u8)> {
    let rel = (to as i64).wrapping_sub((stub + STUB_LEN) as i64);
    let rel = i32::try_from(rel).ok()?;
    Some((rel.to_le_bytes(), 0xe9))
}

#[cfg(test)]
#[path = "cache_code_tests.rs"]
mod tests;
