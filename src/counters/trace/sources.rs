//! Where in the program's source an instruction comes from, for `--by-function` and
//! `--by-line`: the function and line of the **innermost frame in the program's own code**.
//!
//! Compilers inline: a rayon `for_each` closure's loop runs inside
//! `rayon::iter::plumbing::bridge_producer_consumer::helper`, and the symbol table (what perf
//! and `nm` see) names only that outer function. DWARF keeps the inlined frames (each
//! `DW_TAG_inlined_subroutine` with its call site), and `addr2line` (over gimli) walks them
//! innermost first. Of those frames, the innermost whose file is the program's own code (not
//! the Rust standard library's `/rustc/…` sources, not a dependency under `~/.cargo/registry`,
//! not a system header under `/usr/`) is where the user should look: `a * x` in the closure at
//! `examples/rayon_regions.rs:22`, not `<f64 as Mul>::mul` in `core/src/ops/arith.rs`. When no
//! frame is the program's own (a library doing its own work), the innermost frame is used.
//!
//! A module without DWARF falls back to its symbol table (no line), and the report says which
//! modules those were (`Sources::without_lines`).

use super::symbols::demangle;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// One place work is attributed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    /// `function (module)`, demangled, e.g. `rayon_regions::daxpy::{closure#0} (rayon_regions)`.
    pub function: Rc<str>,
    /// `file:line` of that frame, relative to the working directory where it lies below it;
    /// `None` without line information.
    pub line: Option<Rc<str>>,
}

/// One frame at an address, innermost first.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Whether a source file belongs to the program being profiled rather than to the Rust
/// toolchain, a downloaded dependency or the system.
pub fn own_code(file: &str) -> bool {
    const FOREIGN: [&str; 6] = [
        "/rustc/",
        "/.cargo/registry/",
        "/.cargo/git/",
        "/.rustup/toolchains/",
        "/usr/",
        "/build/glibc",
    ];
    !FOREIGN.iter().any(|f| file.contains(f))
}

/// The frame to attribute to: the innermost own-code frame, else the innermost.
pub fn pick(frames: &[Frame]) -> Option<&Frame> {
    frames
        .iter()
        .find(|f| f.file.as_deref().is_some_and(own_code) && f.function.is_some())
        .or_else(|| frames.iter().find(|f| f.function.is_some()))
        .or(frames.first())
}

/// `path` as a reader wants it: relative to `cwd` where it lies below it; the standard
/// library's sources from `library/` on (`/rustc/HASH/library/core/src/…` → `core/src/…`);
/// a dependency's from its crate directory (`~/.cargo/registry/src/INDEX/rayon-1.12.0/src/…` →
/// `rayon-1.12.0/src/…`).
fn shorten(path: &str, cwd: Option<&str>) -> String {
    if path.starts_with("/rustc/")
        && let Some(i) = path.find("/library/")
    {
        return path[i + "/library/".len()..].to_string();
    }
    for store in ["/.cargo/registry/src/", "/.cargo/git/checkouts/"] {
        if let Some(i) = path.find(store) {
            let rest = &path[i + store.len()..];
            // Past the index (or repository) directory.
            if let Some(j) = rest.find('/') {
                return rest[j + 1..].to_string();
            }
        }
    }
    if let Some(c) = cwd
        && let Some(rest) = path.strip_prefix(c)
        && let Some(rest) = rest.strip_prefix('/')
    {
        return rest.to_string();
    }
    path.to_string()
}

/// DWARF readers of the files one process maps, loaded on first use.
#[derive(Default)]
pub struct Sources {
    loaders: HashMap<String, Option<addr2line::Loader>>,
    /// One `Rc` per distinct site, so work can be summed by pointer while tracing.
    interned: HashMap<Site, Rc<Site>>,
    /// Modules (file names) whose instructions were attributed without DWARF.
    without_lines: BTreeSet<String>,
    cwd: Option<String>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("files", &self.loaders.len())
            .field("without_lines", &self.without_lines)
            .finish()
    }
}

impl Sources {
    pub fn new() -> Sources {
        Sources {
            cwd: std::env::current_dir().ok().and_then(|p| p.to_str().map(str::to_string)),
            ..Default::default()
        }
    }

    /// The file's DWARF reader, `None` when it has no `.debug_info` (stripped, or a distro
    /// library whose debug info is a separate package) or cannot be read.
    fn loader(&mut self, path: &str) -> Option<&addr2line::Loader> {
        self.loaders
            .entry(path.to_string())
            .or_insert_with(|| {
                let l = addr2line::Loader::new(path).ok()?;
                l.get_section_range(b".debug_info")?;
                Some(l)
            })
            .as_ref()
    }

    /// The frames at file virtual address `vaddr` of `path`, innermost first; empty without
    /// DWARF there.
    pub fn frames(&mut self, path: &str, vaddr: u64) -> Vec<Frame> {
        let Some(l) = self.loader(path) else { return Vec::new() };
        let mut out = Vec::new();
        let Ok(mut it) = l.find_frames(vaddr) else { return out };
        while let Ok(Some(f)) = it.next() {
            let function = f.function.as_ref().and_then(|n| n.raw_name().ok()).map(|n| demangle(&n));
            let (file, line) = match f.location {
                Some(loc) => (loc.file.map(str::to_string), loc.line),
                None => (None, None),
            };
            out.push(Frame { function, file, line });
            if out.len() > 64 {
                break;
            }
        }
        out
    }

    /// The site of one instruction: `path`/`module` is the mapped file, `vaddr` the address in
    /// it, `symbol` the symbol-table name (already demangled) for the fallback.
    pub fn site(&mut self, path: &str, module: &str, vaddr: u64, symbol: Option<&str>) -> Site {
        let frames = self.frames(path, vaddr);
        if self.loader(path).is_none() {
            self.without_lines.insert(module.to_string());
        }
        match pick(&frames) {
            Some(f) => {
                // The outermost frame is the function the symbol names: its symbol has the
                // full path even where DWARF has only a bare name (`line-tables-only` builds
                // keep no linkage names: `main`, `{closure#0}`).
                let outermost = frames.last().is_some_and(|l| std::ptr::eq(l, f));
                let name = match (outermost, symbol) {
                    (true, Some(s)) => s,
                    _ => f.function.as_deref().or(symbol).unwrap_or("[unknown]"),
                };
                let line = match (&f.file, f.line) {
                    (Some(file), Some(l)) => Some(Rc::from(format!("{}:{l}", shorten(file, self.cwd.as_deref())))),
                    (Some(file), None) => Some(Rc::from(shorten(file, self.cwd.as_deref()))),
                    _ => None,
                };
                Site {
                    function: Rc::from(format!("{name} ({module})")),
                    line,
                }
            }
            // No DWARF for this file, or none covering this address (hand-written assembly,
            // precompiled parts): the symbol.
            None => Site {
                function: Rc::from(match symbol {
                    Some(s) => format!("{s} ({module})"),
                    None => format!("[{module}]"),
                }),
                line: None,
            },
        }
    }

    /// The one shared copy of `site`.
    pub fn intern(&mut self, site: Site) -> Rc<Site> {
        self.interned.entry(site.clone()).or_insert_with(|| Rc::new(site)).clone()
    }

    /// Modules whose work was attributed through their symbol table only.
    pub fn without_lines(&self) -> impl Iterator<Item = &str> {
        self.without_lines.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, line: u32) -> Frame {
        Frame {
            function: Some(function.to_string()),
            file: Some(file.to_string()),
            line: Some(line),
        }
    }

    #[test]
    fn innermost_own_frame_wins() {
        let frames = [
            frame(
                "<f64 as core::ops::arith::Mul>::mul",
                "/rustc/4a5c1b2/library/core/src/ops/arith.rs",
                215,
            ),
            frame("app::daxpy::{{closure}}", "/home/u/app/src/main.rs", 37),
            frame(
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
                "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.12.0/src/iter/plumbing/mod.rs",
                470,
            ),
            frame("app::main", "/home/u/app/src/main.rs", 50),
        ];
        assert_eq!(pick(&frames).unwrap().line, Some(37));
        // Nothing of the program's own: the innermost frame.
        assert_eq!(pick(&[frames[0].clone(), frames[2].clone()]).unwrap().line, Some(215));
        assert!(pick(&[]).is_none());
        assert!(!own_code("/usr/include/x86_64-linux-gnu/bits/string_fortified.h"));
        assert!(own_code("src/main.rs"));
        assert_eq!(shorten("/w/app/src/main.rs", Some("/w/app")), "src/main.rs");
        assert_eq!(shorten("/w/application/src/main.rs", Some("/w/app")), "/w/application/src/main.rs");
        assert_eq!(
            shorten("/rustc/59807616e1fa/library/core/src/iter/range.rs", None),
            "core/src/iter/range.rs"
        );
        assert_eq!(
            shorten(
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.12.0/src/iter/plumbing/mod.rs",
                None
            ),
            "rayon-1.12.0/src/iter/plumbing/mod.rs"
        );
    }

    /// Our own test binary has DWARF (debug = 1 in the release and test profiles): the address
    /// of a function resolves to its own name and to this file.
    #[test]
    fn resolves_a_function_of_this_binary() {
        #[inline(never)]
        fn marker_function_for_dwarf(x: u64) -> u64 {
            std::hint::black_box(x).wrapping_mul(3)
        }
        let f: fn(u64) -> u64 = marker_function_for_dwarf;
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        let maps = super::super::symbols::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let addr = f as usize as u64;
        let m = maps.iter().find(|m| addr >= m.start && addr < m.end).unwrap();
        let elf = super::super::symbols::parse_elf(&std::fs::read(exe).unwrap()).unwrap();
        let va = elf.to_vaddr(addr, m.start, m.offset).unwrap();
        let mut s = Sources::new();
        let frames = s.frames(exe, va);
        if frames.is_empty() {
            eprintln!("skipped: the test binary has no DWARF");
            return;
        }
        let site = s.site(exe, "test", va, None);
        assert!(site.function.contains("marker_function_for_dwarf"), "{site:?}");
        let line = site.line.unwrap();
        assert!(line.contains("sources.rs:"), "{line}");
        // No DWARF in a file that is not an ELF: the symbol, no line, and the module is listed.
        let none = s.site("/proc/self/status", "status", 0x1000, Some("f"));
        assert_eq!((&*none.function, none.line), ("f (status)", None));
        assert_eq!(s.without_lines().collect::<Vec<_>>(), ["status"]);
    }
}
