//! The emulator's tests, by instruction family; here the harness and the memory and
//! unknown-value cases.

use super::*;
use iced_x86::{Decoder, DecoderOptions};

mod evex;
mod integer;
mod vector;

fn emu_run(bytes: &[u8], set: &[(usize, u64)]) -> (Option<bool>, [Option<u64>; 16]) {
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut e = Emu::new(&regs, mem);
    for (k, v) in set {
        e.regs[*k] = Some(*v);
    }
    let mut f = InstructionInfoFactory::new();
    let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
    let mut taken = None;
    while d.can_decode() {
        let i = d.decode();
        if i.is_jcc_short_or_near() {
            taken = e.taken(&i);
        } else {
            e.step(&i, &mut f);
        }
    }
    (taken, e.regs)
}

/// Encode instructions (iced's encoder) and run them through the emulator.
fn emu_asm(code: &[iced_x86::Instruction], set: &[(usize, u64)]) -> (Option<bool>, [Option<u64>; 16]) {
    let mut bytes = Vec::new();
    for i in code {
        let mut e = iced_x86::Encoder::new(64);
        e.encode(i, 0x1000).unwrap();
        bytes.extend(e.take_buffer());
    }
    emu_run(&bytes, set)
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn volatile_memory_reads_as_unknown_and_the_rest_of_its_page_as_itself() {
    // A thread's rseq area beside ordinary data in one page: cpu_id (what glibc's
    // pthread_create reads) must come out unknown, the word after it as stored.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let cells: Box<[u64; 8]> = Box::new(std::array::from_fn(|k| seed.rotate_left(k as u32 * 7) | 1));
    let base = cells.as_ptr() as u64;
    // (The volatile range: bytes 8..16; the reads: [rax+8] and [rax+16], 4 bytes each.)
    let code = [0x8b, 0x78, 0x08, 0x8b, 0x70, 0x10]; // mov edi,[rax+8]; mov esi,[rax+16]
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    for volatile in [false, true] {
        let ranges = if volatile { vec![(base + 8, base + 16)] } else { Vec::new() };
        let mut e = Emu::new(&regs, mem.clone()).with_volatile(&ranges);
        e.regs[0] = Some(base);
        let mut f = InstructionInfoFactory::new();
        let mut d = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE);
        while d.can_decode() {
            e.step(&d.decode(), &mut f);
        }
        let want_edi = (!volatile).then_some(cells[1] & 0xffff_ffff);
        assert_eq!(e.regs[7], want_edi, "edi, volatile {volatile}");
        assert_eq!(e.regs[6], Some(cells[2] & 0xffff_ffff), "esi, volatile {volatile}");
    }
}

#[test]
fn mixed_precision_and_amx_instructions_are_not_mis_emulated() {
    let mem = Rc::new(Memory::open(nix::unistd::Pid::this()));
    // SAFETY: user_regs_struct is plain integers.
    let regs: nix::libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let run = |bytes: &[u8]| {
        let mut e = Emu::new(&regs, mem.clone());
        for k in 0..16 {
            e.regs[k] = Some(0x1000 * (k as u64 + 1));
        }
        let mut f = InstructionInfoFactory::new();
        let mut d = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
        while d.can_decode() {
            e.step(&d.decode(), &mut f);
        }
        e
    };
    let known = |e: &Emu| e.regs.iter().enumerate().all(|(k, r)| *r == Some(0x1000 * (k as u64 + 1)));
    // Register-only vector and tile work writes no general register and no memory.
    for bytes in [
        &[0x62, 0xf2, 0x76, 0x49, 0x52, 0xc2][..], // vdpbf16ps zmm0{k1}, zmm1, zmm2
        &[0xc4, 0xe2, 0x75, 0x50, 0xc2],           // {vex} vpdpbusd ymm0, ymm1, ymm2
        &[0x62, 0xf2, 0x76, 0x08, 0x52, 0x00],     // vdpbf16ps xmm0, xmm1, [rax] (a load)
        &[0xc4, 0xe2, 0x6a, 0x5c, 0xc1],           // tdpbf16ps tmm0, tmm1, tmm2
        &[0xc4, 0xe2, 0x7b, 0x4b, 0x0c, 0x16],     // tileloadd tmm1, [rsi+rdx]
        &[0xc4, 0xe2, 0x78, 0x49, 0xc0],           // tilerelease
    ] {
        let e = run(bytes);
        assert!(known(&e) && !e.poisoned, "{bytes:x?}");
    }
    // A tile store writes rows × colsb bytes, strided, of a shape the emulator does not
    // know: nothing read from memory after it may be trusted.
    let e = run(&[0xc4, 0xe2, 0x7a, 0x4b, 0x04, 0x0f]); // tilestored [rdi+rcx], tmm0
    assert!(e.poisoned && known(&e));
}

#[test]
fn unknown_stays_unknown() {
    // vpmovmskb eax, ymm1; test eax, eax; je
    let (t, r) = emu_run(&[0xc5, 0xfd, 0xd7, 0xc1, 0x85, 0xc0, 0x74, 0x00], &[(0, 0)]);
    assert_eq!((t, r[0]), (None, None));
    // mov al, 1 and mov ah, 1 merge into bits 0-7 and 8-15
    let (_, r) = emu_run(&[0xb0, 0x01], &[(0, 0x1200)]);
    assert_eq!(r[0], Some(0x1201));
    let (_, r) = emu_run(&[0xb4, 0x01], &[(0, 0xff_1234)]);
    assert_eq!(r[0], Some(0xff_0134));
    // push rbx; pop rcx
    let mut stack = [0u64; 8];
    let sp = stack.as_mut_ptr() as u64 + 32;
    let (_, r) = emu_run(&[0x53, 0x59], &[(4, sp), (3, 77)]);
    assert_eq!((r[1], r[4]), (Some(77), Some(sp)));
    std::hint::black_box(&stack);
}
