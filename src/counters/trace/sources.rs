//! Where in the program's source an instruction comes from, for `--by-function` and
//! `--by-line`: the function and line of the **innermost frame in the program's own code**,
//! else of the innermost frame outside the toolchain.
//!
//! Compilers inline: a rayon `for_each` closure's loop runs inside
//! `rayon::iter::plumbing::bridge_producer_consumer::helper`, and the symbol table (what perf
//! and `nm` see) names only that outer function. DWARF keeps the inlined frames (each
//! `DW_TAG_inlined_subroutine` with its call site), and `addr2line` (over gimli) walks them
//! innermost first. Of those frames, the innermost whose file is the program's own code (not
//! the Rust standard library's `/rustc/…` sources, not a dependency under `~/.cargo/registry`,
//! not a system header under `/usr/`) is where the user should look: `a * x` in the closure at
//! `examples/rayon_regions.rs:22`, not `<f64 as Mul>::mul` in `core/src/ops/arith.rs`. When no
//! frame is the program's own (a dependency doing its own work, e.g. `matrixmultiply`'s dgemm
//! kernel), the innermost frame **outside the toolchain** is used (`toolchain`): not the Rust
//! sysroot (`core`, `alloc`, `std`, stdarch's `core_arch`, found by path or by the `core::`,
//! `alloc::`, `std::` name prefix), not a C/C++ compiler's intrinsic headers (gcc's
//! `lib/gcc/TRIPLE/N/include/*intrin.h`, clang's `lib/clang/N/include/*intrin.h`), not the C++
//! standard library's headers (`include/c++/`): the dgemm kernel's `_mm512_fmadd_pd` line in
//! `dgemm_kernel.rs`, not the intrinsic's own line in `avx512f.rs`. When every frame is the
//! toolchain's (a program calling only `std`), the innermost frame is used. The whole chain
//! stays with the site (`Site::chain`) for whoever wants the innermost frame.
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
    /// Every frame at the instruction, innermost first, the chosen one among them (empty
    /// without DWARF): what was inlined into the chosen frame, and what it was inlined into.
    pub chain: Rc<[ChainFrame]>,
}

impl Site {
    /// A site without line information or inline chain (a symbol).
    pub fn symbol(function: Rc<str>) -> Site {
        Site {
            function,
            line: None,
            chain: Rc::from(Vec::new()),
        }
    }
}

/// One frame of a site's inline chain, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainFrame {
    /// Demangled, without the module.
    pub function: Rc<str>,
    /// `file:line`, shortened like `Site::line`.
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

/// Whether `path` occurs in `file` at the start or right after a `/` (a whole directory
/// name, not the tail of a longer one: `library/core/src/` is not in `mylibrary/core/src/`).
fn has_dir(file: &str, path: &str) -> bool {
    file.match_indices(path)
        .any(|(i, _)| i == 0 || file.as_bytes().get(i - 1) == Some(&b'/'))
}

/// Whether a source file is the Rust sysroot's (`core`, `alloc`, `std`, stdarch's
/// `core_arch`, `core::simd`): remapped (`/rustc/HASH/library/…`, including
/// `library/core/src/../../stdarch/…`), from the `rust-src` component
/// (`lib/rustlib/src/rust/library/…`), a distribution's or a self-built toolchain's
/// (`…/library/core/src/…`).
pub fn rust_sysroot_file(file: &str) -> bool {
    const DIRS: [&str; 8] = [
        "lib/rustlib/src/rust/",
        "library/core/src/",
        "library/alloc/src/",
        "library/std/src/",
        "library/stdarch/",
        "library/portable-simd/",
        "stdarch/crates/",
        "core_arch/src/",
    ];
    file.starts_with("/rustc/") || DIRS.iter().any(|d| has_dir(file, d))
}

/// Whether a source file is one of a C/C++ compiler's own headers (gcc's
/// `lib/gcc/TRIPLE/N/include/`, clang's `lib/clang/N/include/`: the `*intrin.h` intrinsics,
/// `arm_neon.h`…, wherever the compiler is installed) or the C++ standard library's
/// (`include/c++/`: libstdc++, libc++).
pub fn compiler_header(file: &str) -> bool {
    let below = |dir: &str| {
        file.match_indices(dir).any(|(i, _)| {
            (i == 0 || file.as_bytes().get(i - 1) == Some(&b'/')) && file.get(i + dir.len()..).is_some_and(|rest| rest.contains("/include"))
        })
    };
    ["lib/gcc/", "lib64/gcc/", "lib/clang/", "lib64/clang/"].iter().any(|d| below(d)) || has_dir(file, "include/c++/")
}

/// Whether a (demangled) function name is the Rust standard library's or the C++ one's:
/// `core::…`, `alloc::…`, `std::…`, also as the type of a trait impl (`<core::… as …>::…`).
pub fn toolchain_function(name: &str) -> bool {
    let name = name.trim_start_matches('<');
    ["core::", "alloc::", "std::"].iter().any(|p| name.starts_with(p))
}

/// Whether a frame is the toolchain's rather than code somebody wrote for this program or a
/// library of it: the Rust sysroot or a compiler's headers, by file or by function name.
pub fn toolchain(frame: &Frame) -> bool {
    frame.file.as_deref().is_some_and(|f| rust_sysroot_file(f) || compiler_header(f))
        || frame.function.as_deref().is_some_and(toolchain_function)
}

/// The frame to attribute to: the innermost own-code frame, else the innermost frame outside
/// the toolchain (a dependency's, a system library's), else the innermost.
pub fn pick(frames: &[Frame]) -> Option<&Frame> {
    let named = || frames.iter().filter(|f| f.function.is_some());
    named()
        .find(|f| f.file.as_deref().is_some_and(own_code) && !toolchain(f))
        .or_else(|| named().find(|f| !toolchain(f)))
        .or_else(|| named().next())
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
        let cwd = self.cwd.as_deref();
        // The outermost frame is the function the symbol names: its symbol has the full path
        // even where DWARF has only a bare name (`line-tables-only` builds keep no linkage
        // names: `main`, `{closure#0}`).
        let name_of = |f: &Frame| -> String {
            let outermost = frames.last().is_some_and(|l| std::ptr::eq(l, f));
            match (outermost, symbol) {
                (true, Some(s)) => s.to_string(),
                _ => f.function.as_deref().or(symbol).unwrap_or("[unknown]").to_string(),
            }
        };
        let line_of = |f: &Frame| -> Option<Rc<str>> {
            match (&f.file, f.line) {
                (Some(file), Some(l)) => Some(Rc::from(format!("{}:{l}", shorten(file, cwd)))),
                (Some(file), None) => Some(Rc::from(shorten(file, cwd))),
                _ => None,
            }
        };
        match pick(&frames) {
            Some(f) => Site {
                function: Rc::from(format!("{} ({module})", name_of(f))),
                line: line_of(f),
                chain: frames
                    .iter()
                    .map(|g| ChainFrame {
                        function: Rc::from(name_of(g)),
                        line: line_of(g),
                    })
                    .collect(),
            },
            // No DWARF for this file, or none covering this address (hand-written assembly,
            // precompiled parts): the symbol.
            None => Site::symbol(Rc::from(match symbol {
                Some(s) => format!("{s} ({module})"),
                None => format!("[{module}]"),
            })),
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
            frame("app::daxpy::{{closure}}", "/u/app/src/main.rs", 37),
            frame(
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
                "/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.12.0/src/iter/plumbing/mod.rs",
                470,
            ),
            frame("app::main", "/u/app/src/main.rs", 50),
        ];
        assert_eq!(pick(&frames).unwrap().line, Some(37));
        // Nothing of the program's own: the innermost frame outside the toolchain (rayon's).
        assert_eq!(pick(&[frames[0].clone(), frames[2].clone()]).unwrap().line, Some(470));
        // Nothing but the toolchain's: the innermost frame.
        let spec_fold = frame(
            "core::iter::range::<impl Iterator for Range<usize>>::fold",
            "/rustc/4a5c1b2/library/core/src/iter/range.rs",
            772,
        );
        assert_eq!(pick(&[frames[0].clone(), spec_fold]).unwrap().line, Some(215));
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
                "/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.12.0/src/iter/plumbing/mod.rs",
                None
            ),
            "rayon-1.12.0/src/iter/plumbing/mod.rs"
        );
    }

    /// Toolchain frames (the Rust sysroot in its path shapes, compiler headers, names only).
    const TOOLCHAIN: [(&str, Option<&str>); 12] = [
        (
            "core::core_arch::x86::avx512f::_mm512_fmadd_pd",
            Some("/rustc/59807616e1fa/library/core/src/../../stdarch/crates/core_arch/src/x86/avx512f.rs"),
        ),
        (
            "core::core_arch::x86::fma::_mm256_fmadd_pd",
            Some("/rustc/59807616e1fa/library/stdarch/crates/core_arch/src/x86/fma.rs"),
        ),
        (
            "<f64 as core::ops::arith::Mul>::mul",
            Some("/rustc/4a5c1b2/library/core/src/ops/arith.rs"),
        ),
        (
            "<alloc::vec::Vec<f64> as core::ops::index::Index<usize>>::index",
            Some("/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/alloc/src/vec/mod.rs"),
        ),
        ("std::io::stdio::_print", Some("/usr/src/rustc-1.85.0/library/std/src/io/stdio.rs")),
        ("get_unchecked", Some("/u/src/rust/library/core/src/slice/index.rs")),
        ("core::ptr::read", None),
        ("_mm256_fmadd_pd", Some("/usr/lib/gcc/x86_64-linux-gnu/12/include/fmaintrin.h")),
        (
            "_mm512_fmadd_pd",
            Some("/opt/gcc-14.2/lib/gcc/x86_64-pc-linux-gnu/14.2.0/include/avx512fintrin.h"),
        ),
        ("_mm256_add_ps", Some("/opt/llvm-19/lib/clang/19/include/avxintrin.h")),
        ("vfmaq_f64", Some("/usr/lib/llvm-18/lib/clang/18/include/arm_neon.h")),
        ("std::vector<double>::operator[]", Some("/usr/include/c++/12/bits/stl_vector.h")),
    ];
    /// The program's own frames.
    const OWN: [(&str, Option<&str>); 3] = [
        ("app::kernel", Some("/u/app/src/kernel.rs")),
        ("app::main::{closure#0}", Some("src/main.rs")),
        ("fma_loop", Some("/u/cproj/fma.c")),
    ];
    /// Dependencies' frames (not the program's own, not the toolchain's).
    const DEPENDENCY: [(&str, Option<&str>); 3] = [
        (
            "matrixmultiply::dgemm_kernel::kernel_target_avx512",
            Some("/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/matrixmultiply-0.3.9/src/dgemm_kernel.rs"),
        ),
        (
            "rayon::iter::plumbing::bridge_producer_consumer::helper",
            Some("/u/.cargo/git/checkouts/rayon-1a2b3c/0123abc/src/iter/plumbing/mod.rs"),
        ),
        ("cblas_dgemm", Some("/usr/src/openblas/interface/gemm.c")),
    ];

    /// xorshift64*: a few random numbers without a dependency.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
        }
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Kind {
        Toolchain,
        Own,
        Dependency,
    }

    fn random_frame(r: &mut Rng, kind: Kind, line: u32) -> Frame {
        let pool: &[(&str, Option<&str>)] = match kind {
            Kind::Toolchain => &TOOLCHAIN,
            Kind::Own => &OWN,
            Kind::Dependency => &DEPENDENCY,
        };
        let (function, file) = pool[r.below(pool.len())];
        Frame {
            function: Some(function.to_string()),
            file: file.map(str::to_string),
            line: Some(line),
        }
    }

    #[test]
    fn frames_are_classified_by_path_and_name() {
        for (f, file) in TOOLCHAIN {
            assert!(
                toolchain(&Frame {
                    function: Some(f.to_string()),
                    file: file.map(str::to_string),
                    line: None
                }),
                "{f} {file:?}"
            );
            if let Some(file) = file {
                assert!(rust_sysroot_file(file) || compiler_header(file), "{file}");
            }
        }
        for (f, file) in OWN.iter().chain(&DEPENDENCY) {
            let frame = Frame {
                function: Some(f.to_string()),
                file: file.map(str::to_string),
                line: None,
            };
            assert!(!toolchain(&frame), "{f} {file:?}");
        }
        // Whole directory names only; a user's impl of a core trait is the user's.
        assert!(!rust_sysroot_file("/u/mylibrary/core/src/lib.rs"));
        assert!(!rust_sysroot_file("/u/app/src/core_arch.rs"));
        assert!(!compiler_header("/u/proj/include/simd_intrin.h"));
        assert!(!compiler_header("/u/lib/gcc/notes.c"));
        assert!(!toolchain_function("<app::V as core::ops::Add>::add"));
        assert!(!toolchain_function("stdx::f"));
        assert!(toolchain_function("<<core::slice::Iter<f64> as core::iter::Iterator>::next"));
        // Odd input: no panic, nothing matched.
        for odd in [
            "",
            "/",
            "lib/gcc/",
            "lib/clang/x/include",
            "é/lib/gcc/é/include/é",
            "<<<",
            "library/core/src/",
        ] {
            let _ = (rust_sysroot_file(odd), compiler_header(odd), toolchain_function(odd));
        }
        assert!(compiler_header("lib/clang/x/include/a.h"));
    }

    /// Random inline chains: toolchain frames at random depths inside, around and outside the
    /// frames somebody wrote; the pick is the innermost own frame, else the innermost
    /// dependency frame, else (all toolchain) the innermost frame.
    #[test]
    fn random_chains_pick_the_innermost_frame_outside_the_toolchain() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("seed {seed}");
        let mut r = Rng(seed);
        let mut seen = [0usize; 3];
        for _ in 0..5000 {
            let depth = 1 + r.below(12);
            // Mostly toolchain frames; sometimes none of anything else.
            let weights = [r.below(4) + 1, r.below(2), r.below(2)];
            let kinds: Vec<Kind> = (0..depth)
                .map(|_| {
                    let x = r.below(weights.iter().sum::<usize>().max(1));
                    if x < weights[0] {
                        Kind::Toolchain
                    } else if x < weights[0] + weights[1] {
                        Kind::Own
                    } else {
                        Kind::Dependency
                    }
                })
                .collect();
            let frames: Vec<Frame> = kinds
                .iter()
                .enumerate()
                .map(|(i, k)| random_frame(&mut r, *k, i as u32 + 1))
                .collect();
            let want = kinds
                .iter()
                .position(|k| *k == Kind::Own)
                .or_else(|| kinds.iter().position(|k| *k == Kind::Dependency))
                .unwrap_or(0);
            seen[kinds[want] as usize] += 1;
            let got = pick(&frames).unwrap();
            assert_eq!(got.line, Some(want as u32 + 1), "{kinds:?} {frames:#?}");
            // Where only one kind of code somebody wrote is there, the pick is the innermost
            // frame outside the toolchain.
            if !(kinds.contains(&Kind::Own) && kinds.contains(&Kind::Dependency)) {
                let outside = frames.iter().position(|f| !toolchain(f)).unwrap_or(0);
                assert_eq!(got.line, Some(outside as u32 + 1), "{frames:#?}");
            }
        }
        assert!(seen.iter().all(|n| *n > 100), "{seen:?}");
    }

    #[test]
    fn frames_without_a_name_or_file() {
        let unnamed = Frame {
            function: None,
            file: Some("/u/app/src/main.rs".into()),
            line: Some(3),
        };
        let intrinsic = frame("_mm256_fmadd_pd", "/usr/lib/gcc/x86_64-linux-gnu/12/include/fmaintrin.h", 49);
        let nofile = Frame {
            function: Some("kernel".into()),
            file: None,
            line: None,
        };
        // An unnamed frame is never picked while a named one is there.
        assert_eq!(pick(&[unnamed.clone(), intrinsic.clone()]), Some(&intrinsic));
        // A frame of unknown file outside the toolchain beats the intrinsic inside it.
        assert_eq!(pick(&[intrinsic.clone(), nofile.clone()]), Some(&nofile));
        assert_eq!(pick(std::slice::from_ref(&unnamed)), Some(&unnamed));
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
