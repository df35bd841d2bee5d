//! Displaced execution: copies of instructions and single-block loops in scratch slots mapped in
//! the tracee, so a thread passes a breakpoint without taking it out.

use nix::libc;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::counters::trace::sys;
use crate::counters::trace::xol::{self, Stub, Xol};

use super::Tracer;
use super::block::Block;
use super::threads::{StepKind, Then};

impl Tracer<'_> {
    /// The displaced copy holding `addr` in space `si`: (original address, stub).
    pub(super) fn stub_holding(&self, si: usize, addr: u64) -> Option<(u64, Stub)> {
        let sp = &self.spaces[si];
        if !sp.xol.in_areas(addr) {
            return None;
        }
        sp.xol.stub_at(addr)
    }

    /// Let `pid`, at `pc` where one of our breakpoints is installed (its instruction already
    /// accounted for by the caller), go on without taking the breakpoint out: through the
    /// instruction's displaced copy. `then`: None to run natively, else single-step on as it says.
    /// With one thread in the space, or when no copy can be made, the breakpoint is stepped
    /// over the classic way (a window other threads could pass uncounted: recorded and noted).
    pub(super) fn pass_bp(&mut self, pid: Pid, si: usize, pc: u64, mut regs: libc::user_regs_struct, then: Option<Then>) {
        // A lone thread passing a breakpoint while counting runs the displaced copy too: the
        // breakpoint stays in, and the step (a stop) and the two writes that take it out and
        // put it back are saved. (Passing outside counting keeps the step: `StepKind::Over`
        // looks at the state after it, and counting may have started meanwhile.)
        let sp = &self.spaces[si];
        let lone_counting = sp.threads <= 1 && then.is_none() && sp.active() && !sp.stepping;
        if (sp.threads > 1 || lone_counting)
            && let Some(stub) = self.stub_for(pid, si, pc)
        {
            self.stats.displaced += 1;
            self.move_rip(pid, &mut regs, stub.at);
            match then {
                None => self.cont(pid, None),
                Some(then) => {
                    self.set_step(pid, StepKind::Displaced { orig: pc, then });
                    self.step(pid, None);
                }
            }
            return;
        }
        if self.spaces[si].threads > 1 {
            self.stats.racy_passes += 1;
            if self.stats.racy_at.len() < 8 && !self.stats.racy_at.contains(&pc) {
                self.stats.racy_at.push(pc);
            }
        }
        let counting = self.spaces[si].active();
        self.spaces[si].uninstall(pc);
        if let Some(t) = self.threads.get_mut(&pid) {
            t.reinstall.push(pc);
        }
        let kind = match then {
            None => StepKind::Over { counting },
            Some(t) => t.step_kind(),
        };
        self.set_step(pid, kind);
        self.step(pid, None);
    }

    /// The displaced copy of the instruction at `pc`, made on first use (a scratch area mapped
    /// in the tracee near `pc` when none is within reach). None when it cannot be made.
    fn stub_for(&mut self, pid: Pid, si: usize, pc: u64) -> Option<Stub> {
        if let Some(s) = self.spaces[si].xol.stub(pc) {
            return s;
        }
        let insn = self.spaces[si].insn_at(pc, &mut self.factory);
        let made = self
            .place(pid, si, pc, xol::STUB_MAX, |at| xol::encode_stub(&insn.instr, at))
            .map(|(at, len, back)| Stub {
                at,
                back: at + back,
                end: at + len,
                resume: insn.instr.next_ip(),
            });
        self.spaces[si].xol.set_stub(pc, made);
        made
    }

    /// Encode something at a reserved place near `near` and write it into the tracee:
    /// (address, length, the encoder's offset).
    pub(super) fn place(
        &mut self,
        pid: Pid,
        si: usize,
        near: u64,
        room: u64,
        encode: impl Fn(u64) -> Option<(Vec<u8>, u64)>,
    ) -> Option<(u64, u64, u64)> {
        let at = match self.spaces[si].xol.reserve(near, room) {
            Some(a) => a,
            None => {
                if !self.map_area(pid, si, near) {
                    return None;
                }
                self.spaces[si].xol.reserve(near, room)?
            }
        };
        let (bytes, off) = encode(at)?;
        if bytes.len() as u64 > room {
            return None;
        }
        // Slots are handed out once and never reused, moved or freed (a thread may sit in
        // any copy, blocked in a system call, for as long as it likes): the slot must still
        // be blank, as the anonymous mapping made it.
        let mut was = vec![0u8; bytes.len()];
        if self.spaces[si].mem.read(at, &mut was) != was.len() || was.iter().any(|b| *b != 0) {
            self.stats.scratch_overwrites += 1;
            return None;
        }
        if !self.spaces[si].mem.write(at, &bytes) {
            return None;
        }
        Some((at, bytes.len() as u64, off))
    }

    /// Map a scratch area (read + execute, private, anonymous) in the tracee within reach of
    /// `near`, by running mmap in the stopped thread `pid`.
    fn map_area(&mut self, pid: Pid, si: usize, near: u64) -> bool {
        if self.spaces[si].xol.area_failed_near(near) {
            return false;
        }
        let prot = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        for hint in Xol::hints(near) {
            match self.mmap_in(pid, si, hint, xol::AREA_SIZE, prot, true) {
                Some(r) if r.abs_diff(near) < xol::REACH => {
                    self.spaces[si].xol.add_area(r);
                    return true;
                }
                Some(_) => {}
                None if self.spaces[si].xol.syscall_at.is_none() => break,
                None => {}
            }
        }
        self.spaces[si].xol.area_failed(near);
        false
    }

    /// Run `mmap(hint, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE [| MAP_FIXED_NOREPLACE])` in the
    /// stopped thread `pid` (through a `syscall` instruction found in its executable memory):
    /// the address mapped, or None (taken, refused, or no `syscall` found).
    pub(super) fn mmap_in(&mut self, pid: Pid, si: usize, hint: u64, len: u64, prot: u64, noreplace: bool) -> Option<u64> {
        let ok_at = |mem: &sys::Memory, a: u64| {
            let mut b = [0u8; 2];
            mem.read(a, &mut b) == 2 && b == [0x0f, 0x05]
        };
        let sc = match self.spaces[si].xol.syscall_at {
            Some(a) if ok_at(&self.spaces[si].mem, a) => Some(a),
            _ => {
                let leader = self.spaces[si].leader;
                let a = sys::find_syscall_insn(leader, &self.spaces[si].mem);
                self.spaces[si].xol.syscall_at = a;
                a
            }
        }?;
        const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
        // No swap reserved: the code cache's table and counter areas are large and mostly
        // untouched (their pages are made as they are used).
        let mut flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as u64;
        if noreplace {
            flags |= MAP_FIXED_NOREPLACE;
        }
        self.flush_all();
        let (r, seen) = sys::inject_syscall(pid, sc, libc::SYS_mmap as u64, [hint, len, prot, flags, u64::MAX, 0]);
        self.requeue(pid, seen);
        let r = r?;
        // EEXIST (taken), or a kernel without NOREPLACE.
        ((r as i64) >= 0 || (r as i64) <= -4096).then_some(r)
    }

    /// Wait statuses seen while a system call was injected: exits are handled later, signals
    /// are sent again (they had not been delivered).
    fn requeue(&mut self, pid: Pid, seen: Vec<WaitStatus>) {
        for st in seen {
            match st {
                WaitStatus::Stopped(_, sig) => {
                    if let Some(th) = self.threads.get(&pid) {
                        let leader = self.spaces[th.space].leader;
                        sys::tgkill(leader, pid, sig);
                    }
                }
                other => self.deferred.push_back(other),
            }
        }
    }

    /// The displaced copy of the single-block loop `block`, made on first use.
    pub(super) fn loop_for(&mut self, pid: Pid, si: usize, block: &Block) -> Option<xol::LoopCopy> {
        if let Some(l) = self.spaces[si].xol.loop_copy(block.start) {
            return l;
        }
        let insns: Vec<iced_x86::Instruction> = block.insns.iter().map(|i| i.instr).collect();
        let room = (block.end - block.start) * 2 + 64;
        let made = self
            .place(pid, si, block.start, room, |at| xol::encode_loop(&insns, at))
            .map(|(at, _, off)| xol::LoopCopy { at, exit_trap: at + off });
        self.spaces[si].xol.set_loop(block.start, made);
        made
    }
}
