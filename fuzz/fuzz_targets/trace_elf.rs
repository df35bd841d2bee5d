//! The trace backend's parsers on arbitrary bytes: the ELF64 symbol reader, /proc/PID/maps
//! lines, symbol demangling (Rust, C++, the C++ path fallback), and instruction
//! classification of whatever decodes. None may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roofline::__private::trace::{classify, symbols};

fuzz_target!(|data: &[u8]| {
    if let Some(info) = symbols::parse_elf(data) {
        let _ = info.function_at(0x1000);
        let _ = info.to_vaddr(0x2000, 0x1000, 0x40);
        let _ = info.find("main");
    }
    let text = String::from_utf8_lossy(data);
    let _ = symbols::parse_maps(&text);
    let _ = symbols::demangle(&text);
    let _ = symbols::demangle(&format!("_ZN{text}"));
    let mut d = iced_x86::Decoder::with_ip(64, data, 0x40_0000, iced_x86::DecoderOptions::NONE);
    let mut f = iced_x86::InstructionInfoFactory::new();
    for _ in 0..64 {
        if !d.can_decode() {
            break;
        }
        let i = d.decode();
        let c = classify::classify(&i, &mut f, data.first().is_some_and(|b| b & 1 == 1));
        let _ = c.mem.iter().map(|m| m.bytes()).sum::<u64>();
    }
});
