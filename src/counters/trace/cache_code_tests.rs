use super::*;
use crate::counters::trace::classify::classify;
use iced_x86::{Decoder, DecoderOptions, Mnemonic};
use std::rc::Rc;

fn block_at(bytes: &[u8], ip: u64) -> Vec<Rc<Insn>> {
    let mut f = iced_x86::InstructionInfoFactory::new();
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut v = Vec::new();
    while d.can_decode() {
        let i = d.decode();
        v.push(Rc::new(classify(&i, &mut f, false)));
    }
    v
}

fn decode(bytes: &[u8], ip: u64) -> Vec<Instruction> {
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut v = Vec::new();
    while d.can_decode() {
        v.push(d.decode());
    }
    v
}

const AT: u64 = 0x7f00_1000_0000;
const COUNTER: u64 = 0x40;
const TABLE_PTR: u64 = 0x7f00_0ff0_0000;

#[test]
fn a_loop_block_counts_first_and_exits_through_stubs() {
    // 0x7f00_0000_1000: add rax, 1 (writes every flag); cmp rax, rsi; jne 0x7f00_0000_1000
    let insns = block_at(&[0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf0, 0x75, 0xf7], 0x7f00_0000_1000);
    assert_eq!(insns[2].flow, Flow::CondJump(0x7f00_0000_1000));
    let t = translate(&insns, AT, COUNTER, TABLE_PTR, &|_| None).unwrap();
    let out = decode(&t.bytes, AT);
    // Flags are dead at the start: the counter's add comes first, without pushfq.
    assert_eq!(out[0].mnemonic(), Mnemonic::Add);
    assert_eq!(out[0].segment_prefix(), Register::GS);
    assert_eq!((out[0].memory_base(), out[0].memory_index()), (Register::None, Register::None));
    assert_eq!(out[0].memory_displacement64(), COUNTER);
    assert!(out.iter().all(|i| i.mnemonic() != Mnemonic::Pushfq));
    // Two stubs: the taken branch (back to the head) and the fall-through.
    let mut kinds: Vec<ExitKind> = t.stubs.iter().map(|s| s.1).collect();
    kinds.sort_by_key(|k| match k {
        ExitKind::Direct(x) | ExitKind::Miss(x) => *x,
    });
    assert_eq!(kinds, vec![ExitKind::Direct(0x7f00_0000_1000), ExitKind::Direct(0x7f00_0000_1009)]);
    for (off, _) in &t.stubs {
        assert_eq!(&t.bytes[*off as usize..(*off + STUB_LEN) as usize], &[0xcc; 5]);
    }
    // Linked to itself: the jcc's target is the translation.
    let t2 = translate(&insns, AT, COUNTER, TABLE_PTR, &|x| (x == 0x7f00_0000_1000).then_some(AT)).unwrap();
    let out2 = decode(&t2.bytes, AT);
    let jne = out2.iter().find(|i| i.mnemonic() == Mnemonic::Jne).unwrap();
    assert_eq!(jne.near_branch_target(), AT);
    assert_eq!(t2.stubs.len(), 1);
}

#[test]
fn flags_read_before_written_are_saved_around_the_counter() {
    // adc rax, rbx (reads CF); ret
    let insns = block_at(&[0x48, 0x11, 0xd8, 0xc3], 0x40_1000);
    let t = translate(&insns, 0x4000_0000, 0x40, 0x3ff0_0000, &|_| None).unwrap();
    let out = decode(&t.bytes, 0x4000_0000);
    let m: Vec<Mnemonic> = out.iter().map(|i| i.mnemonic()).collect();
    assert_eq!(
        &m[..5],
        &[Mnemonic::Lea, Mnemonic::Pushfq, Mnemonic::Add, Mnemonic::Popfq, Mnemonic::Lea]
    );
    assert_eq!(out[0].memory_displacement64() as i64, -128);
    assert_eq!(m[5], Mnemonic::Adc);
    // The return looks its target up and leaves with `ret 136`; one miss stub.
    let ret = out.iter().find(|i| i.mnemonic() == Mnemonic::Ret).unwrap();
    assert_eq!(ret.immediate16(), 136);
    assert_eq!(t.stubs.len(), 1);
    assert_eq!(t.stubs[0].1, ExitKind::Miss(0x40_1003));
    let table_load = out
        .iter()
        .find(|i| i.mnemonic() == Mnemonic::Add && i.op0_register() == Register::RDX)
        .unwrap();
    assert_eq!(table_load.ip_rel_memory_address(), 0x3ff0_0000);
}

#[test]
fn a_call_pushes_the_original_return_address() {
    // 0x7f00_0000_1000: mov eax, 1; call 0x7f00_0000_2000
    let insns = block_at(&[0xb8, 0x01, 0x00, 0x00, 0x00, 0xe8, 0xf6, 0x0f, 0x00, 0x00], 0x7f00_0000_1000);
    assert_eq!(insns[1].flow, Flow::Call(0x7f00_0000_2000));
    let t = translate(&insns, AT, COUNTER, TABLE_PTR, &|_| None).unwrap();
    let out = decode(&t.bytes, AT);
    let movs: Vec<u32> = out
        .iter()
        .filter(|i| i.code() == Code::Mov_rm32_imm32)
        .map(|i| i.immediate32())
        .collect();
    assert_eq!(movs, vec![0x0000_100a, 0x7f00]);
    assert_eq!(t.stubs, vec![(t.stubs[0].0, ExitKind::Direct(0x7f00_0000_2000))]);
}

#[test]
fn indirect_branches_through_rsp_and_system_calls_are_not_translated() {
    assert!(!translatable(&block_at(&[0x0f, 0x05], 0x1000))); // syscall
    assert!(!translatable(&block_at(&[0xf3, 0xa6], 0x1000))); // repe cmpsb
    assert!(!translatable(&block_at(&[0xff, 0xe4], 0x1000))); // jmp rsp
    assert!(translatable(&block_at(&[0xff, 0xe0], 0x1000))); // jmp rax
    assert!(translatable(&block_at(&[0xff, 0x64, 0x24, 0x08], 0x1000))); // jmp [rsp+8]
    let t = translate(
        &block_at(&[0xff, 0x64, 0x24, 0x08], 0x1000),
        0x4000_0000,
        0x3ff0_0040,
        0x3ff0_0000,
        &|_| None,
    )
    .unwrap();
    let out = decode(&t.bytes, 0x4000_0000);
    // The operand read with rsp 160 lower: [rsp+168].
    let load = out
        .iter()
        .find(|i| i.mnemonic() == Mnemonic::Mov && i.op0_register() == Register::RCX && i.op1_kind() == OpKind::Memory)
        .unwrap();
    assert_eq!(load.memory_base(), Register::RSP);
    assert_eq!(load.memory_displacement64(), 168);
    assert_eq!(out.iter().find(|i| i.mnemonic() == Mnemonic::Ret).unwrap().immediate16(), 128);
}

#[test]
fn jump_tables_with_notrack_or_a_flat_segment_are_translated_and_fs_ones_are_not() {
    // notrack jmp [rax*8+0x78ae40], as gcc -fcf-protection emits a switch (python3.12 on Ubuntu).
    let notrack = [0x3e, 0xff, 0x24, 0xc5, 0x40, 0xae, 0x78, 0x00];
    let plain = &notrack[1..];
    assert!(translatable(&block_at(&notrack, 0x60_2aa5)));
    let load = |bytes: &[u8]| {
        let t = translate(&block_at(bytes, 0x60_2aa5), 0x4000_0000, 0x40, 0x3ff0_0000, &|_| None).unwrap();
        let out = decode(&t.bytes, 0x4000_0000);
        let l = *out
            .iter()
            .find(|i| i.mnemonic() == Mnemonic::Mov && i.op0_register() == Register::RCX && i.op1_kind() == OpKind::Memory)
            .unwrap();
        (
            l.memory_base(),
            l.memory_index(),
            l.memory_index_scale(),
            l.memory_displacement64(),
            l.memory_segment(),
        )
    };
    // The same load of the target as without the prefix: [rax*8+0x78ae40], flat.
    assert_eq!(load(&notrack), load(plain));
    assert_eq!(load(plain), (Register::None, Register::RAX, 8, 0x78_ae40, Register::DS));
    // cs, es, ss: flat too; fs and gs (64 and 65) have bases of their own.
    for prefix in [0x2e, 0x26, 0x36] {
        let bytes: Vec<u8> = std::iter::once(prefix).chain(plain.iter().copied()).collect();
        assert!(translatable(&block_at(&bytes, 0x60_2aa5)), "prefix {prefix:#x}");
    }
    for prefix in [0x64, 0x65] {
        let bytes: Vec<u8> = std::iter::once(prefix).chain(plain.iter().copied()).collect();
        assert!(!translatable(&block_at(&bytes, 0x60_2aa5)), "prefix {prefix:#x}");
    }
}

#[test]
fn rep_movs_and_stos_add_rcx_to_their_own_counter_before_they_run() {
    // The block's counter at 0x40, so the rep's iteration counter is at 0x48.
    for bytes in [&[0xf3, 0x48, 0xab][..], &[0xf3, 0xa4], &[0xf3, 0x3e, 0xa4]] {
        let insns = block_at(bytes, 0x1000);
        assert!(translatable(&insns), "{}", insns[0].instr);
        assert_eq!(rep_counted(&insns), vec![0]);
        let t = translate(&insns, 0x4000_0000, 0x40, 0x3ff0_0000, &|_| None).unwrap();
        let out = decode(&t.bytes, 0x4000_0000);
        let add = out
            .iter()
            .position(|i| i.code() == Code::Add_rm64_r64 && i.op1_register() == Register::RCX)
            .unwrap_or_else(|| panic!("no add of rcx: {out:?}"));
        assert_eq!(out[add].memory_segment(), Register::GS);
        assert_eq!(out[add].memory_displacement64(), 0x48);
        // Flags kept around it, and the string instruction itself after it.
        assert_eq!(out[add - 1].code(), Code::Pushfq);
        assert_eq!(out[add + 1].code(), Code::Popfq);
        let rep = out.iter().position(|i| i.is_string_instruction()).unwrap();
        assert!(rep > add && out[rep].has_rep_prefix(), "{out:?}");
    }
    // Ended by the data (repe cmps, repne scas), 32-bit addressing (ecx), an fs segment: out.
    for bytes in [&[0xf3, 0xa6][..], &[0xf2, 0xae], &[0x67, 0xf3, 0xab], &[0x64, 0xf3, 0xa4]] {
        let insns = block_at(bytes, 0x1000);
        assert!(!translatable(&insns), "{}", insns[0].instr);
        assert!(rep_counted(&insns).is_empty());
    }
}

#[test]
fn link_bytes_reach_and_encode_a_jump() {
    let (rel, op) = link_bytes(0x1000, 0x2000).unwrap();
    assert_eq!(op, 0xe9);
    assert_eq!(i32::from_le_bytes(rel), 0x2000 - 0x1005);
    assert!(link_bytes(0x1000, 0x1_0000_1000).is_none());
}

#[test]
fn operands_naming_the_blocks_own_addresses_keep_the_original_addresses() {
    // A function that takes its own address (CPython's `subtype_traverse` compares a type's
    // traverse function with itself), at B = 0x7f00_0000_2000:
    //   B+0:  push r15
    //   B+2:  lea rax,[rip-9]      (B: the block's own start)
    //   B+9:  lea rcx,[rip+0]      (B+16: an instruction inside the block)
    //   B+16: cmp rbx,rax
    //   B+19: je B+37
    const B: u64 = 0x7f00_0000_2000;
    let bytes = [
        0x41, 0x57, 0x48, 0x8d, 0x05, 0xf7, 0xff, 0xff, 0xff, 0x48, 0x8d, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x48, 0x39, 0xc3, 0x74, 0x10,
    ];
    let insns = block_at(&bytes, B);
    assert_eq!(insns[1].instr.ip_rel_memory_address(), B);
    assert_eq!(insns[2].instr.ip_rel_memory_address(), B + 16);
    let t = translate(&insns, AT, COUNTER, TABLE_PTR, &|_| None).unwrap();
    let out = decode(&t.bytes, AT);
    let leas: Vec<u64> = out
        .iter()
        .filter(|i| i.mnemonic() == Mnemonic::Lea && i.memory_base() == Register::RIP)
        .map(|i| i.ip_rel_memory_address())
        .collect();
    assert_eq!(leas, vec![B, B + 16]);
}

/// The bucket the lookup's instructions compute for `target` (mov, imul, shr, shl as encoded),
/// and the displacements of its loads from the bucket.
fn encoded_bucket(out: &[Instruction], target: u64) -> (Vec<u64>, Vec<i64>) {
    let mut buckets = Vec::new();
    let mut rdx = 0u64;
    for i in out {
        match i.code() {
            Code::Mov_r64_imm64 if i.op0_register() == Register::RDX => rdx = i.immediate64(),
            Code::Imul_r64_rm64 => {
                assert_eq!((i.op0_register(), i.op1_register()), (Register::RDX, Register::RCX));
                rdx = rdx.wrapping_mul(target);
            }
            Code::Shr_rm64_imm8 if i.op0_register() == Register::RDX => rdx >>= i.immediate8(),
            Code::Shl_rm64_imm8 if i.op0_register() == Register::RDX => {
                rdx <<= i.immediate8();
                buckets.push(rdx / (WAYS * 8));
            }
            _ => {}
        }
    }
    let loads = out
        .iter()
        .filter(|i| i.code() == Code::Mov_r64_rm64 && i.op0_register() == Register::RDX && i.memory_base() == Register::RDX)
        .map(|i| i.memory_displacement64() as i64)
        .collect();
    (buckets, loads)
}

#[test]
fn the_lookup_probes_both_ways_of_the_bucket_the_tracer_fills() {
    // ret at 0x40_1000
    let insns = block_at(&[0xc3], 0x40_1000);
    let t = translate(&insns, 0x4000_0000, 0x40, 0x3ff0_0000, &|_| None).unwrap();
    let out = decode(&t.bytes, 0x4000_0000);
    for target in [0x7fff_f7b0_54d0_u64, 0x7fff_f7b8_54d0, 0x40_1234, 0x5555_5555_9a10] {
        let (buckets, loads) = encoded_bucket(&out, target);
        assert_eq!(buckets, vec![table_bucket(target); WAYS as usize], "{target:#x}");
        assert_eq!(loads, (0..WAYS as i64).map(|w| 8 * w).collect::<Vec<_>>());
    }
    assert!(table_bucket(u64::MAX) < TABLE_BUCKETS);
}

#[test]
fn code_laid_out_in_power_of_two_strides_does_not_share_buckets() {
    // CPython's `PyErr_Occurred` and another hot function of libpython, 512 KiB apart, shared
    // the slot of a table indexed by the address's low 18 bits: one of them trapped at every
    // lookup.
    assert_ne!(table_bucket(0x7fff_f7b0_54d0), table_bucket(0x7fff_f7b8_54d0));
    // 20 000 block starts at 16-byte steps with 256 KiB strides among them (several libraries'
    // functions at the same offsets): how many find both ways of their bucket taken.
    let mut count = std::collections::HashMap::new();
    let mut lost = 0;
    for lib in 0..10u64 {
        for k in 0..2_000u64 {
            let a = 0x7fff_f780_0000 + lib * (1 << 18) + k * 16 * 7;
            let c = count.entry(table_bucket(a)).or_insert(0u64);
            *c += 1;
            if *c > WAYS {
                lost += 1;
            }
        }
    }
    assert!(lost < 20, "{lost} of 20 000 targets found no free way");
}

/// kmovd k1, ecx; vmovdqu8 ymm16{k1}{z}, [rsi]; vfmadd231pd zmm0{k2}, zmm1, [rax];
/// vpcmpeqb k3{k1}, ymm2, ymm1; ret
const MASKED: [u8; 23] = [
    0xc5, 0xfb, 0x92, 0xc9, 0x62, 0xe1, 0x7f, 0xa9, 0x6f, 0x06, 0x62, 0xf2, 0xf5, 0x4a, 0xb8, 0x00, 0x62, 0xf1, 0x6d, 0x29, 0x74, 0xd9,
    0xc3,
];

#[test]
fn masked_instructions_count_their_active_lanes_in_counters_after_the_blocks() {
    let insns = block_at(&MASKED, 0x7f00_0000_1000);
    assert_eq!(insns[1].mask, Some(1));
    assert_eq!(masked_lanes(&insns[1]), Some(Some(32)), "32 byte lanes of a ymm");
    assert_eq!(masked_lanes(&insns[2]), Some(Some(8)), "8 doubles of a zmm");
    assert_eq!(masked_lanes(&insns[0]), None, "not masked");
    assert_eq!(lane_counted(&insns)[..2], [(1, 32), (2, 8)]);
    assert!(translatable(&insns), "opmasks written and read inside the block");
    let t = translate(&insns, AT, COUNTER, TABLE_PTR, &|_| None).unwrap();
    let out = decode(&t.bytes, AT);
    // Before each lane-counted instruction: its mask's low `lanes` bits counted into the next
    // counter, rax and the flags saved below the red zone and restored.
    for (k, (mnemonic, kmov, and)) in [
        (Mnemonic::Vmovdqu8, Code::VEX_Kmovd_r32_kr, None),
        (Mnemonic::Vfmadd231pd, Code::VEX_Kmovw_r32_kr, Some(0xff)),
    ]
    .into_iter()
    .enumerate()
    {
        let at = out.iter().position(|i| i.mnemonic() == mnemonic).unwrap();
        let pre: Vec<&Instruction> = out[..at].iter().rev().take(if and.is_some() { 10 } else { 9 }).rev().collect();
        let codes: Vec<Mnemonic> = pre.iter().map(|i| i.mnemonic()).collect();
        let mut want = vec![Mnemonic::Lea, Mnemonic::Push, Mnemonic::Pushfq, Mnemonic::Kmovw];
        if kmov == Code::VEX_Kmovd_r32_kr {
            want[3] = Mnemonic::Kmovd;
        }
        if and.is_some() {
            want.push(Mnemonic::And);
        }
        want.extend([Mnemonic::Popcnt, Mnemonic::Add, Mnemonic::Popfq, Mnemonic::Pop, Mnemonic::Lea]);
        assert_eq!(codes, want, "before {mnemonic:?}");
        assert_eq!(pre[0].memory_displacement64() as i64, -128);
        assert_eq!(pre[3].code(), kmov);
        assert_eq!(pre[3].op1_register(), [Register::K1, Register::K2][k]);
        if let Some(m) = and {
            assert_eq!(pre[4].immediate32(), m);
        }
        let add = pre[pre.len() - 4];
        assert_eq!(add.segment_prefix(), Register::GS);
        assert_eq!(add.memory_displacement64(), COUNTER + 8 * (k as u64 + 1));
        assert_eq!(add.op1_register(), Register::RAX);
    }
    // The compare into k3 under k1 has no lane-dependent work: no counter before it.
    let cmp = out.iter().position(|i| i.mnemonic() == Mnemonic::Vpcmpeqb).unwrap();
    assert_eq!(out[cmp - 1].mnemonic(), Mnemonic::Vfmadd231pd);
}

#[test]
fn masked_instructions_whose_lanes_cannot_be_counted_keep_their_block_out() {
    // vfmadd231pd zmm0{k2}, zmm1, [rax]: 8 lanes for its flops and its masked load.
    let fma = block_at(&MASKED[10..16], 0x1000);
    assert_eq!(masked_lanes(&fma[0]), Some(Some(8)));
    // Flops over other lanes than the masked bytes: one counter cannot give both.
    let mut mixed = (*fma[0]).clone();
    mixed.flop.as_mut().unwrap().lanes = 4;
    assert_eq!(masked_lanes(&mixed), None);
    assert!(!translatable(&[Rc::new(mixed), block_at(&[0xc3], 0x1006)[0].clone()]));
    // A lane number no single kmov reads whole.
    let mut odd = (*fma[0]).clone();
    odd.flop.as_mut().unwrap().lanes = 24;
    for m in odd.mem.iter_mut() {
        m.elems = 24;
    }
    assert_eq!(masked_lanes(&odd), None);
}

#[test]
fn blocks_that_change_the_gs_base_stay_out_of_the_cache() {
    // The gs base holds the counter area while a thread runs translations.
    for bytes in [&[0xf3, 0x48, 0x0f, 0xae, 0xd8, 0xc3][..], &[0x8e, 0xe8, 0xc3], &[0x0f, 0xa9, 0xc3]] {
        let insns = block_at(bytes, 0x1000);
        assert!(!translatable(&insns), "{}", insns[0].instr);
    }
    // Reading it, or writing fs, is fine: mov eax, gs; wrfsbase rax; ret.
    assert!(translatable(&block_at(&[0x8c, 0xe8, 0xf3, 0x48, 0x0f, 0xae, 0xd0, 0xc3], 0x1000)));
}
