//! Displaced execution ("execute out of line", as uprobes and gdb's displaced stepping do):
//! how a thread gets past an installed breakpoint **without removing it**, so that every other
//! thread of the same address space keeps trapping there.
//!
//! Why: text is shared by all threads of a process. The classic step-over (restore the
//! original byte, single-step, put the `int3` back) leaves a window in which another thread
//! runs through the block uncounted, and a natively run loop (its head breakpoint removed)
//! would let every other thread run that loop uncounted. Instead, the tracer copies the
//! instruction under the breakpoint into a scratch area of the tracee (relocated by iced-x86's
//! `BlockEncoder`: RIP-relative operands and branches keep their meaning), followed by a jump
//! back to the next original instruction, and points the thread's `rip` at the copy.
//! A counted single-block loop is copied whole: its back edge jumps to the copy, its exit
//! falls into an `int3` that tells the tracer the loop is over (trip count from the induction
//! register, as in the one-thread case).
//!
//! `call` cannot be copied as is (the return address pushed would be the copy's): it becomes
//! `lea rsp,[rsp-8]; mov [rsp],lo32; mov [rsp+4],hi32; jmp target`, which pushes the
//! original return address without touching the flags. An indirect call through a memory
//! operand addressed off rsp is not displaced (the operand would move under the push); the
//! tracer then falls back to its single-step path and says so.

use iced_x86::{BlockEncoder, BlockEncoderOptions, Code, Instruction, InstructionBlock, MemoryOperand, OpKind, Register};
use std::collections::HashMap;

/// Size of one scratch area (one mmap in the tracee).
pub const AREA_SIZE: u64 = 1 << 16;
/// An area serves code within this distance (rel32 reaches 2 GiB; the rest is margin for the
/// RIP-relative operands of the copied code, which stay within their module).
pub const REACH: u64 = 1 << 30;

/// A displaced copy of one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stub {
    /// Where the copy starts.
    pub at: u64,
    /// Address of the copy's final `jmp` back to the original code: reached when the
    /// instruction falls through.
    pub back: u64,
    /// One past the stub.
    pub end: u64,
    /// Where the fall-through continues in the original code (the instruction's next address).
    pub resume: u64,
}

/// A displaced copy of a whole single-block loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopCopy {
    pub at: u64,
    /// Address of the `int3` the loop's exit falls into (`rip` is one past it at the trap).
    pub exit_trap: u64,
}

/// The scratch areas of one address space and what was placed in them.
#[derive(Debug, Clone, Default)]
pub struct Xol {
    /// (base, bytes used) of each area.
    areas: Vec<(u64, u64)>,
    /// Per original address: its stub, or None when it cannot be displaced.
    stubs: HashMap<u64, Option<Stub>>,
    /// Per loop head: its copy, or None when it cannot be copied.
    loops: HashMap<u64, Option<LoopCopy>>,
    /// Exit trap address → loop head.
    loop_exits: HashMap<u64, u64>,
    /// Address of a `syscall` instruction in the tracee (for injecting mmap).
    pub syscall_at: Option<u64>,
    /// Areas could not be mapped near this address range (1 GiB granules): don't retry.
    failed_granules: Vec<u64>,
}

impl Xol {
    pub fn stub(&self, addr: u64) -> Option<Option<Stub>> {
        self.stubs.get(&addr).copied()
    }

    pub fn loop_copy(&self, head: u64) -> Option<Option<LoopCopy>> {
        self.loops.get(&head).copied()
    }

    /// The loop head whose copy exits through the trap at `addr`.
    pub fn loop_of_exit(&self, addr: u64) -> Option<u64> {
        self.loop_exits.get(&addr).copied()
    }

    /// The stub holding `addr`: (original address, stub).
    pub fn stub_at(&self, addr: u64) -> Option<(u64, Stub)> {
        self.stubs
            .iter()
            .find_map(|(o, s)| s.filter(|s| addr >= s.at && addr < s.end).map(|s| (*o, s)))
    }

    pub fn in_areas(&self, addr: u64) -> bool {
        self.areas.iter().any(|(b, _)| addr >= *b && addr < b + AREA_SIZE)
    }

    /// Room for `len` bytes within reach of `near`, or None (the caller maps a new area).
    pub fn reserve(&mut self, near: u64, len: u64) -> Option<u64> {
        for (base, used) in &mut self.areas {
            if base.abs_diff(near) < REACH && *used + len <= AREA_SIZE {
                let at = *base + *used;
                *used += len.next_multiple_of(16);
                return Some(at);
            }
        }
        None
    }

    pub fn add_area(&mut self, base: u64) {
        self.areas.push((base, 0));
    }

    pub fn area_failed(&mut self, near: u64) {
        self.failed_granules.push(near >> 30);
    }

    pub fn area_failed_near(&self, near: u64) -> bool {
        self.failed_granules.contains(&(near >> 30))
    }

    pub fn set_stub(&mut self, addr: u64, s: Option<Stub>) {
        self.stubs.insert(addr, s);
    }

    pub fn set_loop(&mut self, head: u64, l: Option<LoopCopy>) {
        if let Some(c) = l {
            self.loop_exits.insert(c.exit_trap, head);
        }
        self.loops.insert(head, l);
    }

    /// Addresses where a new area near `near` may go (tried in order with MAP_FIXED_NOREPLACE).
    pub fn hints(near: u64) -> Vec<u64> {
        let mut v = Vec::new();
        for d in [1u64 << 28, 1 << 29, 3 << 28, 1 << 27, 1 << 26] {
            if let Some(h) = near.checked_sub(d) {
                v.push(h & !0xffff);
            }
            if near + d < (1 << 47) {
                v.push((near + d) & !0xffff);
            }
        }
        v.retain(|h| *h >= 1 << 20);
        v
    }
}

/// Upper bound of a stub's size (for reserving room before encoding).
pub const STUB_MAX: u64 = 64;

/// The displaced copy of `ins` (decoded at its original address) placed at `at`: its bytes and
/// the offset of the final jump back. None when it cannot be displaced.
pub fn encode_stub(ins: &Instruction, at: u64) -> Option<(Vec<u8>, u64)> {
    let ret = ins.next_ip();
    let mut seq: Vec<Instruction> = Vec::new();
    if ins.is_call_near() || ins.is_call_near_indirect() {
        let jmp = if ins.is_call_near() {
            Instruction::with_branch(Code::Jmp_rel32_64, ins.near_branch_target()).ok()?
        } else {
            match ins.op0_kind() {
                OpKind::Register if ins.op0_register() != Register::RSP => {}
                OpKind::Memory if ins.memory_base() != Register::RSP && ins.memory_index() != Register::RSP => {}
                _ => return None,
            }
            if ins.code() != Code::Call_rm64 {
                return None;
            }
            let mut j = *ins;
            j.set_code(Code::Jmp_rm64);
            j
        };
        seq.push(Instruction::with2(Code::Lea_r64_m, Register::RSP, MemoryOperand::with_base_displ(Register::RSP, -8)).ok()?);
        seq.push(Instruction::with2(Code::Mov_rm32_imm32, MemoryOperand::with_base(Register::RSP), ret as u32).ok()?);
        seq.push(
            Instruction::with2(
                Code::Mov_rm32_imm32,
                MemoryOperand::with_base_displ(Register::RSP, 4),
                (ret >> 32) as u32,
            )
            .ok()?,
        );
        seq.push(jmp);
    } else {
        seq.push(*ins);
    }
    // The jump back (and a call's replacement) carry no IP of their own (0): the encoder
    // retargets branches to an IP of the block, so none of them may claim the original one.
    // (A copied RIP-relative operand holds its absolute target, whatever the IP.)
    let mut back = Instruction::with_branch(Code::Jmp_rel32_64, ret).ok()?;
    back.set_ip(0);
    seq.push(back);
    if ins.is_call_near() || ins.is_call_near_indirect() {
        for i in seq.iter_mut() {
            i.set_ip(0);
        }
    }
    let block = InstructionBlock::new(&seq, at);
    let r = BlockEncoder::encode(64, block, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS).ok()?;
    let back = u64::from(*r.new_instruction_offsets.last()?);
    if back == u32::MAX as u64 {
        return None;
    }
    Some((r.code_buffer, back))
}

/// The copy of a single-block loop `insns` (decoded at their original addresses; the last is
/// the conditional jump back to the first) placed at `at`, with an `int3` where the loop
/// falls through. Returns the bytes and the offset of the `int3`.
pub fn encode_loop(insns: &[Instruction], at: u64) -> Option<(Vec<u8>, u64)> {
    let head = insns.first()?.ip();
    let last = insns.last()?;
    if !last.is_jcc_short_or_near() || last.near_branch_target() != head {
        return None;
    }
    let mut seq: Vec<Instruction> = insns.to_vec();
    let mut trap = Instruction::with(Code::Int3);
    trap.set_ip(0);
    seq.push(trap);
    let block = InstructionBlock::new(&seq, at);
    let r = BlockEncoder::encode(64, block, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS).ok()?;
    let off = u64::from(*r.new_instruction_offsets.last()?);
    if off == u32::MAX as u64 {
        return None;
    }
    Some((r.code_buffer, off))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    fn decode_at(bytes: &[u8], ip: u64) -> Vec<Instruction> {
        let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let mut v = Vec::new();
        while d.can_decode() {
            v.push(d.decode());
        }
        v
    }

    #[test]
    fn rip_relative_load_keeps_its_target_and_jumps_back() {
        // 0x401000: mov rax, [rip+0x100]  (48 8b 05 00 01 00 00) → reads 0x401107
        let ins = decode_at(&[0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00], 0x40_1000)[0];
        let at = 0x4000_0000;
        let (bytes, back) = encode_stub(&ins, at).unwrap();
        let out = decode_at(&bytes, at);
        assert_eq!(out[0].mnemonic(), Mnemonic::Mov);
        assert_eq!(out[0].ip_rel_memory_address(), 0x40_1107);
        assert_eq!(out[1].ip(), at + back);
        assert_eq!(out[1].mnemonic(), Mnemonic::Jmp);
        assert_eq!(out[1].near_branch_target(), 0x40_1007);
    }

    #[test]
    fn call_pushes_the_original_return_address() {
        // 0x7f00_0000_1000: call rel32 to 0x7f00_0000_2000 (e8 fb 0f 00 00)
        let ins = decode_at(&[0xe8, 0xfb, 0x0f, 0x00, 0x00], 0x7f00_0000_1000)[0];
        assert_eq!(ins.near_branch_target(), 0x7f00_0000_2000);
        let at = 0x7f00_1000_0000;
        let (bytes, _) = encode_stub(&ins, at).unwrap();
        let out = decode_at(&bytes, at);
        assert_eq!(out[0].mnemonic(), Mnemonic::Lea);
        assert_eq!((out[1].immediate32(), out[2].immediate32()), (0x0000_1005, 0x7f00));
        assert_eq!(out[3].mnemonic(), Mnemonic::Jmp);
        assert_eq!(out[3].near_branch_target(), 0x7f00_0000_2000);
        // An indirect call through rsp is refused; through rax it becomes jmp rax.
        let ind = decode_at(&[0xff, 0xd0], 0x1000)[0];
        let (b2, _) = encode_stub(&ind, 0x2000_0000).unwrap();
        assert_eq!(decode_at(&b2, 0x2000_0000)[3].mnemonic(), Mnemonic::Jmp);
        let rsp = decode_at(&[0xff, 0x54, 0x24, 0x08], 0x1000)[0]; // call [rsp+8]
        assert!(encode_stub(&rsp, 0x2000_0000).is_none());
    }

    #[test]
    fn conditional_branch_targets_stay_in_the_original_code() {
        // 0x1000: jne 0x1010 (75 0e)
        let ins = decode_at(&[0x75, 0x0e], 0x1000)[0];
        let at = 0x1000_0000;
        let (bytes, back) = encode_stub(&ins, at).unwrap();
        let out = decode_at(&bytes, at);
        assert_eq!(out[0].mnemonic(), Mnemonic::Jne);
        assert_eq!(out[0].near_branch_target(), 0x1010);
        let jb = out.iter().find(|i| i.ip() == at + back).unwrap();
        assert_eq!(jb.near_branch_target(), 0x1002);
    }

    #[test]
    fn loop_copy_jumps_back_into_the_copy_and_exits_into_a_trap() {
        // 1000: vaddpd ymm0, ymm0, [rdi+rax*8]; add rax, 4; cmp rax, rsi; jb 1000
        let ins = decode_at(
            &[0xc5, 0xfd, 0x58, 0x04, 0xc7, 0x48, 0x83, 0xc0, 0x04, 0x48, 0x39, 0xf0, 0x72, 0xf2],
            0x1000,
        );
        let at = 0x2000_0000;
        let (bytes, off) = encode_loop(&ins, at).unwrap();
        let out = decode_at(&bytes, at);
        let jb = out.iter().find(|i| i.mnemonic() == Mnemonic::Jb).unwrap();
        assert_eq!(jb.near_branch_target(), at);
        assert_eq!(out.last().unwrap().mnemonic(), Mnemonic::Int3);
        assert_eq!(out.last().unwrap().ip(), at + off);
    }

    #[test]
    fn areas_are_used_within_reach_only() {
        let mut x = Xol::default();
        assert!(x.reserve(0x5555_0000_0000, 32).is_none());
        x.add_area(0x5555_1000_0000);
        let a = x.reserve(0x5555_0000_0000, 32).unwrap();
        assert_eq!(a, 0x5555_1000_0000);
        assert_eq!(x.reserve(0x5555_0000_0000, 8).unwrap(), a + 32);
        assert!(x.reserve(0x7fff_0000_0000, 8).is_none());
        assert!(Xol::hints(0x7fff_0000_0000).iter().all(|h| h.abs_diff(0x7fff_0000_0000) < REACH));
    }
}
