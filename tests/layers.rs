//! The house's layers, read from the source: every `crate::` path in `src/` (outside comments,
//! string literals and test code) is an import, and
//! - a module imports only from its own layer or the ones below it
//!   (schema → machine → counters → model → report views → integrations → cli);
//! - no two modules import each other, directly or round a circle, at any depth (a module and
//!   its own parent or children aside: `mod.rs` and the files it declares are one room).
//!
//! The check needs no outside tool: it reads the files as text.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of each top-level module of `src/`, lowest first.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("util", 0),
    ("schema", 0),
    ("machine", 1),
    ("counters", 2),
    ("ceilings", 2),
    ("model", 3),
    // The CUDA-driver side (device query, ceilings, runs, Nsight Compute import) builds its
    // roofs with the GPU machine model in `model::gpu`, so it stands beside the model.
    ("gpu", 3),
    // Jobs of ranks: launcher environments, per-rank files and their merge (roofs per node
    // from the model).
    ("jobs", 3),
    ("report", 4),
    ("region", 5),
    ("gate", 5),
    ("validate", 5),
    ("doctor", 5),
    ("criterion_support", 5),
    ("cli", 6),
];

/// Names under `crate::` that are not modules of this crate's source (re-exports of other
/// crates) and so belong to no layer.
const OUTSIDE: &[&str] = &["kernels"];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/counters/trace/mod.rs` → `["counters", "trace"]`; `src/lib.rs` → `[]`.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src_dir()).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// Test-only files: `tests.rs`, `*_tests.rs`, and anything under a `tests/` folder of `src/`.
fn is_test_file(file: &Path) -> bool {
    let name = file.file_name().unwrap().to_string_lossy();
    name == "tests.rs" || name.ends_with("_tests.rs") || file.components().any(|c| c.as_os_str() == "tests")
}

/// The code of a file without comments, string and char literals, and without its trailing
/// `#[cfg(test)] mod tests { … }` block.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            i = end;
        } else if b[i] == b'r' && (b[i + 1..].starts_with(b"\"") || b[i + 1..].starts_with(b"#")) && !prev_ident(b, i) {
            // raw string r"…" or r#"…"#
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            let open = i + 1 + hashes;
            if b.get(open) != Some(&b'"') {
                out.push(b[i] as char);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            i = text[open + 1..].find(&close).map_or(b.len(), |e| open + 1 + e + close.len());
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if b[i] == b'\'' && is_char_literal(b, i) {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn prev_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// `'a'`, `'\n'`, `'\u{1F600}'` rather than a lifetime `'a`.
fn is_char_literal(b: &[u8], i: usize) -> bool {
    match b.get(i + 1) {
        Some(b'\\') => true,
        Some(_) => b.get(i + 2) == Some(&b'\'') || (b[i + 1] >= 0x80),
        None => false,
    }
}

fn ident_at(code: &str, at: usize) -> Option<&str> {
    let rest = &code[at..];
    let n = rest.bytes().take_while(|c| c.is_ascii_alphanumeric() || *c == b'_').count();
    (n > 0).then(|| &rest[..n])
}

/// Every module path this file's code names: `crate::a::b::Item` → `[a, b, Item]`, each member
/// of `use crate::a::{b::x, c}` groups (nested too); `super::x` from module `m` resolves to
/// `m`'s parent followed by `x`.
fn imports_of(module: &[String], is_mod_rs: bool, code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    // `super` in a mod.rs names the folder's parent, in a file the file's folder
    let own_parent: Vec<String> = if is_mod_rs || module.is_empty() {
        module[..module.len().saturating_sub(1)].to_vec()
    } else {
        module[..module.len() - 1].to_vec()
    };
    let b = code.as_bytes();
    let mut at = 0;
    while at < b.len() {
        let starts = |p: &str| code[at..].starts_with(p) && !prev_ident(b, at) && !code[..at].ends_with("::");
        let (mut base, mut cur) = if starts("crate::") {
            (Vec::new(), at + "crate::".len())
        } else if starts("super::") {
            let mut base = own_parent.clone();
            let mut cur = at + "super::".len();
            while code[cur..].starts_with("super::") {
                base.pop();
                cur += "super::".len();
            }
            (base, cur)
        } else {
            at += 1;
            continue;
        };
        let depth = base.len();
        parse_tree(code, &mut cur, &mut base, &mut found);
        let _ = depth;
        at = cur.max(at + 1);
    }
    found
}

/// One use tree at `cur` below `base`: `a::b::c`, `a::{b, c::d}`, `{self, x}`.
fn parse_tree(code: &str, cur: &mut usize, base: &mut Vec<String>, found: &mut Vec<Vec<String>>) {
    let depth = base.len();
    loop {
        skip_space(code, cur);
        if code[*cur..].starts_with('{') {
            *cur += 1;
            loop {
                skip_space(code, cur);
                if *cur >= code.len() || code[*cur..].starts_with('}') {
                    *cur += 1;
                    break;
                }
                let mut member = base.clone();
                parse_tree(code, cur, &mut member, found);
                skip_space(code, cur);
                if code[*cur..].starts_with(',') {
                    *cur += 1;
                }
            }
            break;
        }
        match ident_at(code, *cur) {
            Some("self") => *cur += 4,
            Some(id) => {
                base.push(id.to_string());
                *cur += id.len();
            }
            None => break,
        }
        if code[*cur..].starts_with("::") {
            *cur += 2;
        } else {
            break;
        }
    }
    if base.len() > depth || !base.is_empty() {
        found.push(base.clone());
    }
}

fn skip_space(code: &str, cur: &mut usize) {
    while *cur < code.len() && code.as_bytes()[*cur].is_ascii_whitespace() {
        *cur += 1;
    }
}

struct Source {
    module: Vec<String>,
    file: PathBuf,
    imports: Vec<Vec<String>>,
}

fn read_sources() -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| !is_test_file(f))
        .filter(|f| !f.starts_with(src_dir().join("bin")) && module_of(f) != ["main"])
        .map(|file| {
            let module = module_of(&file);
            let is_mod_rs = file.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs");
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            let imports = imports_of(&module, is_mod_rs, &code);
            Source { module, file, imports }
        })
        .collect()
}

/// The longest prefix of `path` that is a module with a source file.
fn target_module(path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|m| modules.contains(m))
}

fn layer_of(top: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == top).map(|(_, l)| *l)
}

#[test]
fn every_module_has_a_layer() {
    let sources = read_sources();
    let tops: BTreeSet<&str> = sources.iter().filter_map(|s| s.module.first()).map(String::as_str).collect();
    let missing: Vec<&str> = tops.into_iter().filter(|t| layer_of(t).is_none()).collect();
    assert!(missing.is_empty(), "modules without a layer in tests/layers.rs LAYERS: {missing:?}");
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let sources = read_sources();
    let mut upward = BTreeSet::new();
    for s in &sources {
        let Some(from) = s.module.first() else { continue };
        let Some(from_layer) = layer_of(from) else { continue };
        for path in &s.imports {
            let to = &path[0];
            if OUTSIDE.contains(&to.as_str()) || to == from {
                continue;
            }
            if let Some(to_layer) = layer_of(to)
                && to_layer > from_layer
            {
                upward.insert(format!(
                    "{} ({}) imports {} ({})",
                    s.file.strip_prefix(src_dir()).unwrap().display(),
                    from_layer,
                    path.join("::"),
                    to_layer
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "{} upward import(s):\n{}",
        upward.len(),
        upward.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let sources = read_sources();
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    // Edges between sibling subtrees: a file in A/… naming something in B/… (A ≠ B, same
    // parent) is an edge A → B. Ancestors and descendants of a module are not its siblings.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for s in &sources {
        for path in &s.imports {
            if OUTSIDE.contains(&path[0].as_str()) {
                continue;
            }
            let Some(to) = target_module(path, &modules) else { continue };
            let common = s.module.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == s.module.len() || common == to.len() {
                continue;
            }
            edges
                .entry(s.module[..=common].to_vec())
                .or_default()
                .insert(to[..=common].to_vec());
        }
    }
    let cycles = strongly_connected(&edges);
    let text: Vec<String> = cycles
        .iter()
        .map(|c| c.iter().map(|m| m.join("::")).collect::<Vec<_>>().join(" ↔ "))
        .collect();
    assert!(text.is_empty(), "module cycles:\n{}", text.join("\n"));
}

/// Components of two or more nodes (Tarjan).
fn strongly_connected(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(st: &mut State<'a>, v: &'a Vec<String>) {
        let i = st.index.len();
        st.index.insert(v, i);
        st.low.insert(v, i);
        st.stack.push(v);
        st.on_stack.insert(v);
        if let Some(next) = st.edges.get(v) {
            for w in next {
                let w = st.edges.get_key_value(w).map_or(w, |(k, _)| k);
                if !st.index.contains_key(w) {
                    visit(st, w);
                    let lw = st.low[w];
                    let lv = st.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if st.on_stack.contains(w) {
                    let iw = st.index[w];
                    let lv = st.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on_stack.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    st.out
}

#[test]
fn the_reader_finds_imports_it_must_find() {
    let code = code_of(
        "use crate::schema::{Point, report::level};\nuse crate::counters::{perf::{self, Scope}, simulated};\n// crate::cli::x\nlet s = \"crate::cli\";\nuse super::simulated::Faults;\nfn f() { crate::machine::this_platform() }\n",
    );
    let module = vec!["counters".to_string(), "backend".to_string()];
    let found = imports_of(&module, false, &code);
    let names: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert!(names.contains(&"schema::Point".to_string()), "{names:?}");
    assert!(names.contains(&"schema::report::level".to_string()), "{names:?}");
    assert!(names.contains(&"counters::simulated::Faults".to_string()), "{names:?}");
    assert!(names.contains(&"machine::this_platform".to_string()), "{names:?}");
    assert!(names.contains(&"counters::perf::Scope".to_string()), "{names:?}");
    assert!(names.contains(&"counters::simulated".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("cli")),
        "comments and strings are not imports: {names:?}"
    );
}

#[test]
fn a_cycle_is_found() {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let m = |s: &str| vec![s.to_string()];
    edges.entry(m("a")).or_default().insert(m("b"));
    edges.entry(m("b")).or_default().insert(m("c"));
    edges.entry(m("c")).or_default().insert(m("a"));
    edges.entry(m("c")).or_default().insert(m("d"));
    let cycles = strongly_connected(&edges);
    assert_eq!(cycles, vec![vec![m("a"), m("b"), m("c")]]);
}
