//! Address feeding (memory mode): the accesses of stepped instructions, emulated blocks and
//! replayed loops, in the order the cache simulator gets them.

use iced_x86::{OpAccess, Register};
use nix::libc;
use nix::unistd::Pid;
use std::collections::HashMap;

use crate::counters::trace::classify::{Insn, TileConfig, TileOp};
use crate::counters::trace::emu::Emu;
use crate::counters::trace::interleave::{Access, Call};
use crate::counters::trace::regions::Snapshot;
use crate::counters::trace::sys;
use crate::counters::trace::{AccessKind, TraceMode};

use super::Tracer;
use super::block::{Block, Stride, full_gpr, reg_value};

/// Per access of an iteration, the constant its address moves by from one iteration to the
/// next, where that holds: the same accesses (sizes, kinds) at iterations 0, 1, the middle and
/// the last, each at its iteration-0 address plus its step times the iteration (in 64-bit
/// wrapping arithmetic, which is the emulator's; a 32-bit address register that wraps in
/// between breaks the line at the last or middle point). None for fewer than 4 iterations.
fn affine_steps(trips: u64, iteration: &dyn Fn(u64, &mut Vec<Access>)) -> Option<Vec<u64>> {
    if trips < 4 {
        return None;
    }
    let at = |t: u64| {
        let mut v = Vec::new();
        iteration(t, &mut v);
        v
    };
    let (first, second) = (at(0), at(1));
    let steps: Vec<u64> = first.iter().zip(&second).map(|(a, b)| b.addr.wrapping_sub(a.addr)).collect();
    let fits = |t: u64, v: &[Access]| {
        v.len() == first.len()
            && v.iter()
                .zip(&first)
                .zip(&steps)
                .all(|((a, f), d)| a.size == f.size && a.kind == f.kind && a.addr == f.addr.wrapping_add(d.wrapping_mul(t)))
    };
    let (mid, last) = (trips / 2, trips - 1);
    (fits(1, &second) && fits(mid, &at(mid)) && fits(last, &at(last))).then_some(steps)
}

/// Memory mode: whether the thread of sink id `id` sleeps in the kernel now (`interleave.rs`).
pub(super) fn asleep_in(ids: &HashMap<Pid, usize>) -> impl FnMut(usize) -> bool + '_ {
    move |id| ids.iter().find(|(_, v)| **v == id).is_some_and(|(p, _)| sys::task_sleeps(*p))
}

impl Tracer<'_> {
    /// The sink's dense id of thread `pid` (assigned at its first access).
    pub(super) fn sink_id(&mut self, pid: Pid) -> usize {
        self.sink_id_of(pid, None)
    }

    /// The sink's id of thread `pid`, created by thread `parent` where known (a new thread
    /// starts at its creator's clock in the interleaving).
    pub(super) fn sink_id_of(&mut self, pid: Pid, parent: Option<Pid>) -> usize {
        if let Some(&id) = self.sink_ids.get(&pid) {
            return id;
        }
        let parent = parent.and_then(|p| self.sink_ids.get(&p).copied());
        let id = match self.free_sink_ids.pop_first() {
            Some(id) => id,
            None => self.sink_ids.len(),
        };
        self.sink_ids.insert(pid, id);
        if let Some(sink) = self.sink.as_deref_mut() {
            self.interleave.join(id, parent, sink, &mut asleep_in(&self.sink_ids));
        }
        id
    }

    /// Memory mode: thread `pid` is about to enter a system call: the other threads' accesses
    /// need not wait for its next ones while it sleeps there (`interleave.rs`).
    /// `call` is what it is (a `futex` wait or wake, or another), `back` the address after the
    /// `syscall` instruction.
    pub(super) fn enters_call(&mut self, pid: Pid, call: Call, back: u64) {
        if let (Some(&id), Some(sink)) = (self.sink_ids.get(&pid), self.sink.as_deref_mut()) {
            self.interleave.call(id, call, sink, &mut asleep_in(&self.sink_ids));
            if let Some(t) = self.threads.get_mut(&pid) {
                t.in_call = Some(back);
            }
        }
    }

    /// Memory mode: thread `pid` traps at `pc` for the first time since it entered a system
    /// call: right after the `syscall` instruction, rax is what the call returned (elsewhere,
    /// a signal handler or a stepped block, it is not known).
    pub(super) fn returns_from_call(&mut self, pid: Pid, pc: u64, rax: u64) {
        let Some(t) = self.threads.get_mut(&pid) else { return };
        let Some(back) = t.in_call.take() else { return };
        if let (Some(&id), Some(sink)) = (self.sink_ids.get(&pid), self.sink.as_deref_mut()) {
            let ret = (pc == back).then_some(rax as i64);
            self.interleave.returned(id, ret, sink, &mut asleep_in(&self.sink_ids));
        }
    }

    /// Memory mode: thread `pid` adds no accesses for a while (it runs outside counting), so
    /// the other threads' accesses need not wait for its next ones.
    pub(super) fn feeds_nothing_soon(&mut self, pid: Pid) {
        if let (Some(&id), Some(sink)) = (self.sink_ids.get(&pid), self.sink.as_deref_mut()) {
            self.interleave.idle(id, sink, &mut asleep_in(&self.sink_ids));
        }
    }

    /// Memory mode: the addresses of `trips` iterations of an affine single-block loop, in
    /// program order, from the registers at its entry (fed in chunks).
    pub(super) fn replay_loop(
        &mut self,
        pid: Pid,
        block: &Block,
        strides: &[Stride],
        entry: &libc::user_regs_struct,
        masks: &[Option<u64>],
        trips: u64,
    ) {
        let tid = self.sink_id(pid);
        self.stats.replayed_loops += 1;
        let mut mask_of: Vec<Option<u64>> = vec![None; block.insns.len()];
        for ((idx, _), m) in block.masked.iter().zip(masks.iter()) {
            mask_of[*idx] = *m;
        }
        // The accesses of iteration `t`, from the registers at entry and the strides.
        let iteration = |t: u64, acc: &mut Vec<Access>| {
            for (idx, insn) in block.insns.iter().enumerate() {
                if insn.mem.is_empty() && !insn.prefetch {
                    continue;
                }
                let mut reg = |r: Register, _: usize, _: usize| -> Option<u64> {
                    match r {
                        Register::FS => Some(entry.fs_base),
                        Register::GS => Some(entry.gs_base),
                        Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
                        Register::RIP => Some(insn.next()),
                        _ => {
                            let full = full_gpr(r);
                            let s = strides.iter().find(|s| s.reg == full)?;
                            let base = reg_value(entry, full)?;
                            let k = t as i64 + i64::from(s.writer < idx);
                            let v = base.wrapping_add(s.stride.wrapping_mul(k) as u64);
                            let v = if s.width32 || r.is_gpr32() { v & 0xffff_ffff } else { v };
                            Some(v)
                        }
                    }
                };
                accesses_of(insn, &mut reg, mask_of[idx], true, acc);
            }
        };
        let mut acc: Vec<Access> = Vec::with_capacity(4096 + 64);
        if let Some(steps) = affine_steps(trips, &iteration) {
            // Each access moves by a constant per iteration (checked at four iterations, 32-bit
            // wrap-around included): the stream is generated by addition, without decoding
            // operands again (the decoding was most of the time of a long replay).
            let mut next: Vec<Access> = Vec::new();
            iteration(0, &mut next);
            for _ in 0..trips {
                // (Pushed one by one: `extend_from_slice` of a few accesses called `memcpy`.)
                for (a, d) in next.iter_mut().zip(&steps) {
                    acc.push(*a);
                    a.addr = a.addr.wrapping_add(*d);
                }
                if acc.len() >= 4096 {
                    self.feed(tid, &acc);
                    acc.clear();
                }
            }
        } else {
            for t in 0..trips {
                iteration(t, &mut acc);
                if acc.len() >= 4096 {
                    self.feed(tid, &acc);
                    acc.clear();
                }
            }
        }
        self.feed(tid, &acc);
    }

    /// Accesses of thread `tid` (a sink id) to the simulated hierarchy: directly while one
    /// thread is traced or every instruction is stepped (the observed order), else through
    /// the interleaving memory mode defines (`interleave.rs`).
    pub(super) fn feed(&mut self, tid: usize, accesses: &[Access]) {
        let Some(sink) = self.sink.as_deref_mut() else { return };
        if self.mode == TraceMode::Memory && (self.sink_ids.len() > 1 || !self.interleave.is_empty()) {
            self.interleave.push(tid, accesses, sink, &mut asleep_in(&self.sink_ids));
            return;
        }
        for a in accesses {
            sink.access_by(tid, a.addr, a.size, a.kind);
        }
    }

    /// The counters now, for a region's window: the accesses threads have queued are fed to
    /// the cache simulator first (they ran before this instant).
    pub fn snapshot(&mut self) -> Snapshot {
        self.finish_feeding();
        self.flush_all_caches(self.main);
        Snapshot {
            total: self.total.clone(),
            levels: self.sink.as_deref().map(|s| s.bytes_so_far()).unwrap_or_default(),
            threads: self.stats.per_thread.iter().map(|t| (t.tid, t.instructions)).collect(),
        }
    }

    /// Feed every access still waiting for its turn (a thread ended, or the trace).
    pub(super) fn finish_feeding(&mut self) {
        if let Some(sink) = self.sink.as_deref_mut() {
            self.interleave.finish(sink, &mut asleep_in(&self.sink_ids));
        }
    }

    /// The general registers at the `syscall` that ends `block`, emulated from `regs` at its
    /// entry (None where the block has nothing else or the emulator does not know them).
    pub(super) fn regs_at_syscall(
        &mut self,
        pid: Pid,
        si: usize,
        block: &Block,
        regs: &libc::user_regs_struct,
    ) -> Option<[Option<u64>; 16]> {
        let (_, body) = block.insns.split_last()?;
        let mut emu = self.emulator(pid, si, regs);
        for insn in body {
            emu.step(&insn.instr, &mut self.factory);
        }
        Some(emu.gprs())
    }

    /// Memory mode without stepping: the effective addresses of a block, in program order,
    /// from the registers at its entry through the emulator (`emu/`, exact or unknown).
    /// None when one cannot be computed (the caller steps through the block instead).
    pub(super) fn block_accesses(
        &mut self,
        pid: Pid,
        si: usize,
        block: &Block,
        masks: &[Option<u64>],
        regs: &libc::user_regs_struct,
    ) -> Option<Vec<Access>> {
        if block.rep {
            return rep_accesses(block, regs);
        }
        let seed = self.vector_seed(pid);
        let mut emu = self.emulator(pid, si, regs).with_vectors(seed);
        let mut out = Vec::new();
        let mut masked = block.masked.iter().zip(masks.iter());
        let mut next_masked = masked.next();
        for (idx, insn) in block.insns.iter().enumerate() {
            let mask = match next_masked {
                Some(((i, _), m)) if *i == idx => {
                    let m = *m;
                    next_masked = masked.next();
                    Some(m?)
                }
                _ => None,
            };
            if !emulated_accesses_masked(&emu, insn, mask, regs, &mut out) {
                return None;
            }
            if idx + 1 < block.insns.len() {
                emu.step(&insn.instr, &mut self.factory);
            }
        }
        Some(out)
    }
}

/// The accesses of `insn` with the addresses from the emulator's registers before it executes
/// (segment bases from the trap's registers); false when one cannot be computed.
pub(super) fn emulated_accesses(emu: &Emu, insn: &Insn, trap: &libc::user_regs_struct, out: &mut Vec<Access>) -> bool {
    emulated_accesses_masked(emu, insn, None, trap, out)
}

fn emulated_accesses_masked(emu: &Emu, insn: &Insn, mask: Option<u64>, trap: &libc::user_regs_struct, out: &mut Vec<Access>) -> bool {
    if insn.mem.is_empty() && insn.string.is_none() && !insn.prefetch {
        return true;
    }
    let mut reg = |r: Register, _elem: usize, _esize: usize| -> Option<u64> {
        if r.is_vector_register() {
            return None;
        }
        match r {
            Register::FS => Some(trap.fs_base),
            Register::GS => Some(trap.gs_base),
            Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
            Register::RIP => Some(insn.next()),
            _ => emu.reg(r),
        }
    };
    accesses_of(insn, &mut reg, mask, false, out)
}

/// The accesses of a `rep movs`/`rep stos` block from the registers at its entry: exactly rcx
/// iterations (a signal may interrupt it; it resumes where it was), rsi/rdi advancing by the
/// element size, backwards when the direction flag is set. None for `repe/repne cmps/scas`
/// (they stop on a comparison) and for more than 16 M elements.
fn rep_accesses(block: &Block, regs: &libc::user_regs_struct) -> Option<Vec<Access>> {
    let insn = block.insns.first()?;
    let s = insn.string?;
    // (An address-size prefix, rare, is left to stepping.)
    if !insn.repeats_rcx_times() || s.elem == 0 {
        return None;
    }
    let count = regs.rcx;
    if count > 1 << 24 {
        return None;
    }
    let step = if regs.eflags >> 10 & 1 == 1 {
        -i64::from(s.elem)
    } else {
        i64::from(s.elem)
    };
    let mut out = Vec::with_capacity((count as usize) * ((s.loads > 0) as usize + (s.stores > 0) as usize));
    for k in 0..count as i64 {
        let d = (k * step) as u64;
        if s.loads > 0 {
            out.push(Access {
                addr: regs.rsi.wrapping_add(d),
                size: s.elem,
                kind: AccessKind::Load,
            });
        }
        if s.stores > 0 {
            out.push(Access {
                addr: regs.rdi.wrapping_add(d),
                size: s.elem,
                kind: AccessKind::Store,
            });
        }
    }
    Some(out)
}

/// The rows a tile load or store moves: one access of `colsb` bytes per row from `start_row`
/// on, row r at base + displacement + r × stride (the index register times the scale).
pub(super) fn tile_accesses(
    insn: &Insn,
    cfg: &TileConfig,
    reg: &mut dyn FnMut(Register, usize, usize) -> Option<u64>,
    out: &mut Vec<Access>,
) {
    let (tile, kind) = match insn.tile {
        Some(TileOp::Load { tile, .. }) => (tile, AccessKind::Load),
        Some(TileOp::Store { tile, .. }) => (tile, AccessKind::Store),
        _ => return,
    };
    let i = &insn.instr;
    let base = iced_x86::UsedMemory::new(
        i.memory_segment(),
        i.memory_base(),
        Register::None,
        1,
        i.memory_displacement64(),
        iced_x86::MemorySize::UInt8,
        OpAccess::Read,
    )
    .virtual_address(0, &mut *reg);
    let stride = match i.memory_index() {
        Register::None => Some(0),
        r => reg(r, 0, 0).map(|v| v.wrapping_mul(u64::from(i.memory_index_scale()))),
    };
    let (Some(base), Some(stride)) = (base, stride) else { return };
    let (rows, colsb) = cfg.shape(tile);
    for r in u64::from(cfg.start_row)..rows {
        out.push(Access {
            addr: base.wrapping_add(r.wrapping_mul(stride)),
            size: colsb as u32,
            kind,
        });
    }
}

/// The accesses of `insn` in program order, addresses from `reg` (a register's value, or a
/// vector register's element `elem` of `esize` bytes), per active element where a mask
/// applies. With `lenient`, an address that cannot be computed is left out (single-stepping
/// always has the registers); otherwise it makes the answer false.
pub(super) fn accesses_of(
    insn: &Insn,
    reg: &mut dyn FnMut(Register, usize, usize) -> Option<u64>,
    mask: Option<u64>,
    lenient: bool,
    out: &mut Vec<Access>,
) -> bool {
    let push = |a: Option<u64>, size: u32, kind: AccessKind, out: &mut Vec<Access>| -> bool {
        match a {
            Some(addr) => {
                out.push(Access { addr, size, kind });
                true
            }
            None => lenient,
        }
    };
    for m in &insn.mem {
        let kind = if m.nt {
            AccessKind::NtStore
        } else if m.store {
            AccessKind::Store
        } else {
            AccessKind::Load
        };
        if m.used.index().is_vector_register() {
            for e in 0..m.elems {
                if m.per_mask_element && mask.is_some_and(|k| k >> e & 1 == 0) {
                    continue;
                }
                let a = m.used.virtual_address(e as usize, &mut *reg);
                if !push(a, m.elem, kind, out) {
                    return false;
                }
            }
        } else {
            let a = m.used.virtual_address(0, &mut *reg);
            if m.per_mask_element {
                if a.is_none() && !lenient {
                    return false;
                }
                for e in 0..m.elems {
                    if mask.is_none_or(|k| k >> e & 1 == 1) {
                        push(a.map(|a| a + u64::from(e * m.elem)), m.elem, kind, out);
                    }
                }
            } else {
                if m.load && m.store && !push(a, m.elem * m.elems, AccessKind::Load, out) {
                    return false;
                }
                if !push(a, m.elem * m.elems, kind, out) {
                    return false;
                }
            }
        }
    }
    if let Some(s) = insn.string {
        if s.rep && !lenient {
            return false;
        }
        if s.loads > 0 && !push(reg(Register::RSI, 0, 8), s.elem, AccessKind::Load, out) {
            return false;
        }
        if s.stores > 0 && !push(reg(Register::RDI, 0, 8), s.elem, AccessKind::Store, out) {
            return false;
        }
    }
    if insn.prefetch {
        let used = iced_x86::UsedMemory::new(
            insn.instr.memory_segment(),
            insn.instr.memory_base(),
            insn.instr.memory_index(),
            insn.instr.memory_index_scale(),
            insn.instr.memory_displacement64(),
            iced_x86::MemorySize::UInt8,
            OpAccess::Read,
        );
        if !push(used.virtual_address(0, &mut *reg), 64, AccessKind::Prefetch, out) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_steps_only_where_every_iteration_is_on_the_line() {
        let mut next = crate::util::xorshift(0x853c_49e6_748f_ea9b);
        for _ in 0..200 {
            let trips = 4 + next() % 5000;
            let n = 1 + (next() % 4) as usize;
            let bases: Vec<u64> = (0..n).map(|_| next() >> 8).collect();
            let strides: Vec<i64> = (0..n).map(|_| (next() % 129) as i64 - 64).collect();
            let access = |i: usize, t: u64| Access {
                addr: bases[i].wrapping_add((strides[i] * t as i64) as u64),
                size: 8 << (i % 3),
                kind: if i == 0 { AccessKind::Store } else { AccessKind::Load },
            };
            let linear = |t: u64, v: &mut Vec<Access>| v.extend((0..n).map(|i| access(i, t)));
            let steps = affine_steps(trips, &linear).expect("a linear stream");
            // The generated stream equals the general one at every iteration.
            let mut at: Vec<Access> = (0..n).map(|i| access(i, 0)).collect();
            for t in 0..trips {
                let mut want = Vec::new();
                linear(t, &mut want);
                assert_eq!(at, want, "iteration {t}");
                for (a, d) in at.iter_mut().zip(&steps) {
                    a.addr = a.addr.wrapping_add(*d);
                }
            }
            // A 32-bit index register that wraps somewhere in the loop: not affine.
            let wrap_at = 1 + next() % (trips - 1);
            let start = 0x1_0000_0000u64 - wrap_at * 8;
            let wrapped = |t: u64, v: &mut Vec<Access>| {
                linear(t, v);
                v[0].addr = 0x7f00_0000_0000 + ((start + 8 * t) & 0xffff_ffff);
            };
            assert!(affine_steps(trips, &wrapped).is_none(), "wrap at {wrap_at} of {trips}");
            // A masked access that appears only in some iterations: not affine.
            let gone = trips / 2 + next() % (trips - trips / 2);
            let varying = |t: u64, v: &mut Vec<Access>| {
                linear(t, v);
                if t >= gone {
                    v.pop();
                }
            };
            assert!(affine_steps(trips, &varying).is_none(), "access gone from {gone} of {trips}");
        }
        assert!(affine_steps(3, &|_, v: &mut Vec<Access>| v.clear()).is_none());
    }
}
