//! Function symbols of a traced process: a minimal ELF64 reader (program headers, .symtab and
//! .dynsym, and the unwind table's function starts for stripped files) and /proc/PID/maps, so
//! each instruction address maps to the function holding it.

use std::collections::HashMap;
use std::rc::Rc;

/// A function symbol of one ELF file (link-time addresses).
#[derive(Debug, Clone, PartialEq)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
}

/// What the tracer needs from one ELF file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ElfInfo {
    /// Sorted by value.
    pub functions: Vec<Symbol>,
    /// PT_LOAD segments: (p_offset, p_vaddr, p_filesz).
    pub loads: Vec<(u64, u64, u64)>,
    /// Function starts (link-time, sorted) from the `.eh_frame_hdr` search table
    /// (PT_GNU_EH_FRAME): what `strip` leaves, as unwinding needs it. Where no symbol names
    /// the function, its start still lets the tracer read its prologue (frame pointer or not).
    pub unwind_starts: Vec<u64>,
}

fn u16_at(d: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(o..o.checked_add(2)?)?.try_into().ok()?))
}
fn u32_at(d: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(o..o.checked_add(4)?)?.try_into().ok()?))
}
fn u64_at(d: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(o..o.checked_add(8)?)?.try_into().ok()?))
}

/// Parse an ELF64 little-endian image. Returns None for anything else or anything malformed
/// (never panics: every offset is checked).
pub fn parse_elf(d: &[u8]) -> Option<ElfInfo> {
    if d.get(..4)? != b"\x7fELF" || *d.get(4)? != 2 || *d.get(5)? != 1 {
        return None;
    }
    let phoff = u64_at(d, 0x20)? as usize;
    let shoff = u64_at(d, 0x28)? as usize;
    let phentsize = u16_at(d, 0x36)? as usize;
    let phnum = u16_at(d, 0x38)? as usize;
    let shentsize = u16_at(d, 0x3a)? as usize;
    let shnum = u16_at(d, 0x3c)? as usize;
    let mut info = ElfInfo::default();
    if phentsize >= 56 {
        for k in 0..phnum.min(4096) {
            let o = phoff.checked_add(k.checked_mul(phentsize)?)?;
            match u32_at(d, o)? {
                1 => info.loads.push((
                    u64_at(d, o.saturating_add(8))?,
                    u64_at(d, o.saturating_add(16))?,
                    u64_at(d, o.saturating_add(32))?,
                )),
                // PT_GNU_EH_FRAME
                0x6474_e550 => {
                    if let (Some(off), Some(va)) = (u64_at(d, o.saturating_add(8)), u64_at(d, o.saturating_add(16))) {
                        info.unwind_starts = eh_frame_hdr_starts(d, off as usize, va);
                    }
                }
                _ => {}
            }
        }
    }
    if shentsize >= 64 {
        let header = |k: usize| SectionHeader::read(d, shoff.checked_add(k.checked_mul(shentsize)?)?);
        for k in 0..shnum.min(65536) {
            let Some(sh) = header(k) else { break };
            // SHT_SYMTAB = 2, SHT_DYNSYM = 11
            if sh.kind != 2 && sh.kind != 11 {
                continue;
            }
            let Some(names) = header(sh.link as usize) else { continue };
            let strtab = d.get(names.offset as usize..(names.offset as usize).checked_add(names.size as usize)?)?;
            if sh.entsize < 24 {
                continue;
            }
            let n = (sh.size / sh.entsize).min(1 << 22) as usize;
            for s in 0..n {
                let so = (sh.offset as usize).checked_add(s.checked_mul(sh.entsize as usize)?)?;
                let (Some(name), Some(st_info), Some(shndx), Some(value), Some(sz)) = (
                    u32_at(d, so),
                    d.get(so.saturating_add(4)).copied(),
                    u16_at(d, so.saturating_add(6)),
                    u64_at(d, so.saturating_add(8)),
                    u64_at(d, so.saturating_add(16)),
                ) else {
                    break;
                };
                // STT_FUNC (2) or STT_GNU_IFUNC (10), defined.
                let ty = st_info & 0xf;
                if (ty != 2 && ty != 10) || shndx == 0 || value == 0 {
                    continue;
                }
                let Some(name) = cstr_at(strtab, name as usize) else { continue };
                let name = String::from_utf8_lossy(name).into_owned();
                info.functions.push(Symbol { name, value, size: sz });
            }
        }
        // The section names' table (e_shstrndx).
        if let Some(names) = u16_at(d, 0x3e).and_then(|i| header(i as usize)) {
            marker_sections(
                d,
                names.offset as usize,
                (0..shnum.min(65536)).map_while(header),
                &mut info.functions,
            );
        }
    }
    info.functions.sort_by(|a, b| a.value.cmp(&b.value).then(b.size.cmp(&a.size)));
    info.functions.dedup_by(|a, b| a.value == b.value);
    Some(info)
}

/// The region markers' own sections (`roofline-marker` puts each marker alone in a section
/// named after it) and the function each holds. `strip` removes the symbol tables but keeps
/// the section headers: a stripped program's markers are found here.
const MARKER_SECTIONS: [(&str, &str); 2] = [
    ("roofline.region_begin", "roofline_region_begin"),
    ("roofline.region_end", "roofline_region_end"),
];

/// One ELF64 section header: the fields the reader uses.
#[derive(Debug, Clone, Copy)]
struct SectionHeader {
    name: u32,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

impl SectionHeader {
    /// The header at file offset `o`; None where it runs past the file.
    fn read(d: &[u8], o: usize) -> Option<SectionHeader> {
        Some(SectionHeader {
            name: u32_at(d, o)?,
            kind: u32_at(d, o.checked_add(4)?)?,
            flags: u64_at(d, o.checked_add(8)?)?,
            addr: u64_at(d, o.checked_add(16)?)?,
            offset: u64_at(d, o.checked_add(24)?)?,
            size: u64_at(d, o.checked_add(32)?)?,
            link: u32_at(d, o.checked_add(40)?)?,
            entsize: u64_at(d, o.checked_add(56)?)?,
        })
    }
}

/// The NUL-terminated string at `at` of `d` (to the end of `d` without a NUL).
fn cstr_at(d: &[u8], at: usize) -> Option<&[u8]> {
    let bytes = d.get(at..)?;
    Some(&bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())])
}

/// Add a function symbol for each marker section (executable, non-empty) whose function no
/// symbol table named; section names are read from the table at file offset `names`.
fn marker_sections(d: &[u8], names: usize, sections: impl Iterator<Item = SectionHeader>, functions: &mut Vec<Symbol>) {
    for sh in sections {
        // SHT_PROGBITS, SHF_EXECINSTR
        if sh.kind != 1 || sh.flags & 0x4 == 0 || sh.size == 0 || sh.addr == 0 {
            continue;
        }
        let Some(name) = names.checked_add(sh.name as usize).and_then(|at| cstr_at(d, at)) else {
            continue;
        };
        for (section_name, function) in MARKER_SECTIONS {
            if name == section_name.as_bytes() && !functions.iter().any(|f| f.name == function) {
                functions.push(Symbol {
                    name: function.to_string(),
                    value: sh.addr,
                    size: sh.size,
                });
            }
        }
    }
}

/// The function starts of an `.eh_frame_hdr` at file offset `off`, link-time address `va` (the
/// LSB's format: version 1, then the encodings of `eh_frame_ptr`, `fde_count` and the table;
/// the table is pairs of (initial location, FDE address)). Only the encodings linkers write
/// are read — a 4- or 8-byte `eh_frame_ptr`, `fde_count` udata4, table datarel|sdata4 (0x3b),
/// relative to the header's own address; anything else gives none.
fn eh_frame_hdr_starts(d: &[u8], off: usize, va: u64) -> Vec<u64> {
    let (Some(&version), Some(&ptr_enc), Some(&count_enc), Some(&table_enc)) = (
        d.get(off),
        d.get(off.saturating_add(1)),
        d.get(off.saturating_add(2)),
        d.get(off.saturating_add(3)),
    ) else {
        return Vec::new();
    };
    let ptr_len = match ptr_enc & 0x0f {
        0x03 | 0x0b => 4,
        0x04 | 0x0c => 8,
        _ => return Vec::new(),
    };
    if version != 1 || count_enc != 0x03 || table_enc != 0x3b {
        return Vec::new();
    }
    let at = off.saturating_add(4 + ptr_len);
    let Some(count) = u32_at(d, at) else { return Vec::new() };
    let mut starts: Vec<u64> = (0..count.min(1 << 22) as usize)
        .map_while(|i| u32_at(d, at.saturating_add(4 + 8 * i)))
        .map(|rel| va.wrapping_add(rel as i32 as i64 as u64))
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
}

impl ElfInfo {
    /// The start of the unwind-table function holding link-time address `vaddr` (the last
    /// start at or below it).
    pub fn unwind_start_at(&self, vaddr: u64) -> Option<u64> {
        let i = self.unwind_starts.partition_point(|&s| s <= vaddr);
        self.unwind_starts.get(i.checked_sub(1)?).copied()
    }

    /// The function holding link-time address `vaddr`.
    pub fn function_at(&self, vaddr: u64) -> Option<&Symbol> {
        let i = self.functions.partition_point(|s| s.value <= vaddr);
        let s = self.functions.get(i.checked_sub(1)?)?;
        (s.size == 0 || vaddr < s.value + s.size).then_some(s)
    }

    pub fn find(&self, name: &str) -> Option<&Symbol> {
        self.functions.iter().find(|s| s.name == name)
    }

    /// Link-time address of a run-time address inside a mapping of file offset `map_off` at `map_start`.
    pub fn to_vaddr(&self, addr: u64, map_start: u64, map_off: u64) -> Option<u64> {
        let file_off = addr - map_start + map_off;
        self.loads
            .iter()
            .find(|(off, _, sz)| file_off >= *off && file_off < off.saturating_add(*sz.max(&1)))
            .map(|(off, va, _)| file_off - off + va)
    }

    /// Run-time address of a link-time address, given a mapping of the file.
    pub fn to_runtime(&self, vaddr: u64, mappings: &[Mapping]) -> Option<u64> {
        let (off, va, _) = self
            .loads
            .iter()
            .find(|(_, va, sz)| vaddr >= *va && vaddr < va.saturating_add(*sz.max(&1)))?;
        let file_off = vaddr - va + off;
        mappings
            .iter()
            .find(|m| file_off >= m.offset && file_off < m.offset + (m.end - m.start))
            .map(|m| m.start + (file_off - m.offset))
    }
}

/// One line of /proc/PID/maps backed by a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub exec: bool,
    pub path: String,
}

/// The file-backed mappings of a `/proc/PID/maps` text (anonymous ones and lines that do not
/// parse skipped).
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let range = it.next()?;
            let perms = it.next()?;
            let offset = u64::from_str_radix(it.next()?, 16).ok()?;
            let _dev = it.next()?;
            let _inode = it.next()?;
            let path = it.collect::<Vec<_>>().join(" ");
            if !path.starts_with('/') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset,
                exec: perms.contains('x'),
                path,
            })
        })
        .collect()
}

/// Symbols of every file mapped by one process, loaded lazily.
#[derive(Debug, Default)]
pub struct ProcessSymbols {
    pid: i32,
    maps: Vec<Mapping>,
    files: HashMap<String, Option<Rc<ElfInfo>>>,
}

/// Where an address lies: module (file name) and function.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    pub module: String,
    pub function: Option<String>,
    /// Run-time address of the function start.
    pub function_start: Option<u64>,
}

/// An address as a place in a mapped file.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    pub path: String,
    pub module: String,
    pub vaddr: u64,
    pub symbol: Option<String>,
}

/// A Rust legacy-mangled symbol: `_ZN…17h<16 hex>E`, then nothing or a `.suffix`.
fn legacy_rust(sym: &str) -> bool {
    let Some(e) = sym.rfind('E') else { return false };
    let (base, suffix) = (&sym[..e], &sym[e + 1..]);
    let hashed = base.len() >= 19 && {
        let h = &base[base.len() - 19..];
        h.starts_with("17h") && h[3..].bytes().all(|b| b.is_ascii_hexdigit())
    };
    hashed && (suffix.is_empty() || suffix.starts_with('.'))
}

/// A symbol as its author wrote it: Rust's legacy and v0 manglings through `rustc-demangle`
/// (without the trailing hash), C++'s Itanium mangling through `cpp_demangle`, anything else
/// (C, assembly) as it is.
pub fn demangle(sym: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(sym) {
        // A C++ name with parameters is not a Rust path: legacy Rust symbols end in their hash
        // `17h` + 16 hex digits + `E` (a `.llvm.N` suffix may follow; `..` stands for `::`
        // inside them, so the suffix is what follows the last `E`).
        let legacy_cpp = sym.starts_with("_ZN") && !legacy_rust(sym);
        if !legacy_cpp {
            return format!("{d:#}");
        }
    }
    if sym.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(sym)
            && let Ok(d) = s.demangle()
        {
            return d;
        }
        // Manglings cpp_demangle cannot parse (some SFINAE expressions of libstdc++):
        // the name's path, its template arguments elided.
        if let Some(path) = cpp_path(sym) {
            return path;
        }
    }
    sym.to_string()
}

/// The qualified name at the head of an Itanium mangling (`_Z` [`N`] (`St` | <length><id>
/// | `I`…)*), template arguments shown as `<…>` and the rest (parameters) left out:
/// `_ZSt9__fill_a1IPddE…` → `std::__fill_a1<…>`. `None` where it does not start so.
fn cpp_path(sym: &str) -> Option<String> {
    let b = sym.strip_prefix("_Z")?.as_bytes();
    let (mut i, nested) = match b.first() {
        Some(b'N') => (1, true),
        _ => (0, false),
    };
    // cv- and ref-qualifiers of a nested member function.
    while nested && matches!(b.get(i), Some(b'K' | b'V' | b'r' | b'R' | b'O')) {
        i += 1;
    }
    let mut parts: Vec<String> = Vec::new();
    loop {
        match b.get(i) {
            Some(b'S') if b.get(i + 1) == Some(&b't') => {
                parts.push("std".into());
                i += 2;
            }
            Some(c) if c.is_ascii_digit() => {
                let mut len = 0usize;
                while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
                    len = len.checked_mul(10)?.checked_add(usize::from(d - b'0'))?;
                    i += 1;
                }
                let id = std::str::from_utf8(b.get(i..i.checked_add(len)?)?).ok()?;
                parts.push(id.to_string());
                i += len;
                if !nested {
                    break;
                }
            }
            _ => break,
        }
    }
    if parts.is_empty() || parts == ["std"] {
        return None;
    }
    let mut name = parts.join("::");
    if b.get(i) == Some(&b'I') {
        name.push_str("<…>");
    }
    Some(name)
}

impl ProcessSymbols {
    pub fn new(pid: i32) -> ProcessSymbols {
        ProcessSymbols { pid, ..Default::default() }
    }

    /// Forget the mappings read so far (code was unmapped): the next lookup reads them again.
    pub fn forget_maps(&mut self) {
        self.maps.clear();
    }

    pub fn refresh(&mut self) {
        if let Ok(t) = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) {
            self.maps = parse_maps(&t);
        }
    }

    fn elf(&mut self, path: &str) -> Option<Rc<ElfInfo>> {
        self.files
            .entry(path.to_string())
            .or_insert_with(|| std::fs::read(path).ok().and_then(|d| parse_elf(&d)).map(Rc::new))
            .clone()
    }

    pub fn locate(&mut self, addr: u64) -> Option<Location> {
        if !self.maps.iter().any(|m| addr >= m.start && addr < m.end) {
            self.refresh();
        }
        let m = self.maps.iter().find(|m| addr >= m.start && addr < m.end)?.clone();
        let module = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
        let elf = self.elf(&m.path);
        let va = elf.as_ref().and_then(|e| e.to_vaddr(addr, m.start, m.offset));
        let (function, function_start) = match elf.as_ref().zip(va).and_then(|(e, va)| {
            let s = e.function_at(va)?;
            Some((s.name.clone(), addr - (va - s.value)))
        }) {
            Some((f, s)) => (Some(f), Some(s)),
            // No symbol (a stripped file): the unwind table's start, without a name.
            None => (
                None,
                elf.as_ref()
                    .zip(va)
                    .and_then(|(e, va)| e.unwind_start_at(va).map(|s| addr - (va - s))),
            ),
        };
        Some(Location {
            module,
            function,
            function_start,
        })
    }

    /// Where `addr` lies in its file: the file's path and name, the address in the file's
    /// virtual address space (what DWARF speaks of) and the symbol around it (mangled).
    pub fn place(&mut self, addr: u64) -> Option<Place> {
        if !self.maps.iter().any(|m| addr >= m.start && addr < m.end) {
            self.refresh();
        }
        let m = self.maps.iter().find(|m| addr >= m.start && addr < m.end)?.clone();
        let elf = self.elf(&m.path)?;
        let vaddr = elf.to_vaddr(addr, m.start, m.offset)?;
        Some(Place {
            module: m.path.rsplit('/').next().unwrap_or(&m.path).to_string(),
            symbol: elf.function_at(vaddr).map(|s| s.name.clone()),
            path: m.path,
            vaddr,
        })
    }

    /// Run-time address of an exported function anywhere in the process (first match).
    pub fn lookup(&mut self, name: &str) -> Option<u64> {
        self.refresh();
        let paths: Vec<String> = {
            let mut v: Vec<String> = self.maps.iter().map(|m| m.path.clone()).collect();
            v.dedup();
            v
        };
        for p in paths {
            let Some(elf) = self.elf(&p) else { continue };
            if let Some(s) = elf.find(name) {
                let maps: Vec<Mapping> = self.maps.iter().filter(|m| m.path == p).cloned().collect();
                if let Some(a) = elf.to_runtime(s.value, &maps) {
                    return Some(a);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod demangle_tests {
    use super::demangle;

    #[test]
    fn rust_cpp_and_c_names() {
        // Rust legacy (hash dropped) and v0 manglings, as rayon's and a closure's symbols look.
        assert_eq!(
            demangle("_ZN5rayon4iter8plumbing24bridge_producer_consumer6helper17hec40a1b2c3d4e5f6E"),
            "rayon::iter::plumbing::bridge_producer_consumer::helper"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(
            demangle("_ZN10rayon_core4join12join_context28_$u7b$$u7b$closure$u7d$$u7d$17hac22aa1c06b3deeeE.llvm.8215011472715315059"),
            "rayon_core::join::join_context::{{closure}}"
        );
        // `..` (for `::`) inside a legacy path is not a suffix.
        assert_eq!(
            demangle(
                "_ZN89_$LT$core..ops..range..Range$LT$T$GT$$u20$as$u20$core..iter..range..RangeIteratorImpl$GT$9spec_next17h1b9715087815cc19E.llvm.42"
            ),
            "<core::ops::range::Range<T> as core::iter::range::RangeIteratorImpl>::spec_next"
        );
        // C++: a function with parameters, a template.
        assert_eq!(demangle("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(
            demangle("_Z5triadIdEvPT_PKS0_S3_S0_m").split('(').next(),
            Some("void triad<double>")
        );
        // Manglings cpp_demangle rejects: the path, template arguments elided.
        assert_eq!(
            demangle("_ZSt9__fill_a1IPddEN9__gnu_cxx11__enable_ifIXsrSt11__is_scalarIT0_E7__valueEvE6__typeET_S8_RKS4_"),
            "std::__fill_a1<…>"
        );
        assert_eq!(super::cpp_path("_ZN3foo3barIiE3bazEv").as_deref(), Some("foo::bar<…>"));
        assert_eq!(super::cpp_path("_ZNK3foo3getEv").as_deref(), Some("foo::get"));
        assert_eq!(super::cpp_path("_Z99x"), None, "a length past the end");
        assert_eq!(super::cpp_path("_ZSt"), None);
        // C and assembly names are left alone.
        assert_eq!(demangle("daxpy_scalar"), "daxpy_scalar");
        assert_eq!(demangle("_start"), "_start");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unwind table of this test executable names (nearly) every sized function the symbol
    /// table does, and nothing outside its executable segments.
    #[test]
    fn unwind_starts_match_the_symbol_table() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let info = parse_elf(&me).unwrap();
        assert!(info.unwind_starts.len() > 100, "{} starts", info.unwind_starts.len());
        assert!(info.unwind_starts.windows(2).all(|w| w[0] < w[1]));
        let in_load = |a: u64| info.loads.iter().any(|(_, va, sz)| a >= *va && a < va + sz);
        assert!(info.unwind_starts.iter().all(|&a| in_load(a)));
        let sized: Vec<&Symbol> = info.functions.iter().filter(|f| f.size >= 16).collect();
        let found = sized.iter().filter(|f| info.unwind_starts.binary_search(&f.value).is_ok()).count();
        assert!(
            found * 10 >= sized.len() * 9,
            "{found} of {} functions start an unwind entry",
            sized.len()
        );
        // An address inside a function maps to that function's start.
        let f = sized[sized.len() / 2];
        if info.unwind_starts.binary_search(&f.value).is_ok() {
            assert_eq!(info.unwind_start_at(f.value + f.size / 2), Some(f.value));
        }
    }

    #[test]
    fn reads_our_own_symbols() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let info = parse_elf(&exe).expect("our own executable is ELF64");
        assert!(!info.loads.is_empty());
        assert!(info.functions.len() > 100);
        let mut ps = ProcessSymbols::new(std::process::id() as i32);
        let here = reads_our_own_symbols as *const () as u64;
        let loc = ps.locate(here).expect("our text is mapped");
        assert!(loc.function.as_deref().unwrap_or("").contains("reads_our_own_symbols"), "{loc:?}");
        assert_eq!(loc.function_start, Some(here));
    }

    /// Our own executable with its symbol tables blanked out (as `strip` leaves it): the
    /// region markers are still found, at the addresses the symbol table gave.
    #[test]
    fn markers_are_found_in_a_stripped_image() {
        // Referenced here, so the linker keeps both markers.
        let markers = [
            crate::region::roofline_region_begin as *const () as usize,
            crate::region::roofline_region_end as *const () as usize,
        ];
        assert!(markers[0] != markers[1]);
        let mut exe = std::fs::read("/proc/self/exe").unwrap();
        let whole = parse_elf(&exe).unwrap();
        let at = |info: &ElfInfo, name: &str| info.functions.iter().find(|f| f.name == name).map(|f| f.value);
        let begin = at(&whole, "roofline_region_begin").expect("the symbol table names the marker");
        let end = at(&whole, "roofline_region_end").expect("the symbol table names the marker");
        let shoff = u64_at(&exe, 0x28).unwrap() as usize;
        let (shentsize, shnum) = (u16_at(&exe, 0x3a).unwrap() as usize, u16_at(&exe, 0x3c).unwrap() as usize);
        let mut blanked = 0;
        for k in 0..shnum {
            let o = shoff + k * shentsize + 4;
            if matches!(u32_at(&exe, o), Some(2 | 11)) {
                exe[o..o + 4].copy_from_slice(&0u32.to_le_bytes());
                blanked += 1;
            }
        }
        assert!(blanked >= 1);
        let stripped = parse_elf(&exe).unwrap();
        assert!(stripped.functions.len() <= 2, "{} functions left", stripped.functions.len());
        assert_eq!(at(&stripped, "roofline_region_begin"), Some(begin));
        assert_eq!(at(&stripped, "roofline_region_end"), Some(end));
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(parse_elf(b"").is_none());
        assert!(parse_elf(b"\x7fELF\x02\x01").is_none());
        let mut d = vec![0u8; 128];
        d[..6].copy_from_slice(b"\x7fELF\x02\x01");
        d[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        d[0x3a] = 64;
        d[0x3c] = 3;
        let _ = parse_elf(&d);
    }

    #[test]
    fn maps_lines() {
        let m = parse_maps("55d0-55e0 r-xp 00001000 08:01 42 /usr/bin/true\n7ff0-7ff1 rw-p 00000000 00:00 0 [stack]\n");
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].start, m[0].offset, m[0].exec), (0x55d0, 0x1000, true));
    }
}
