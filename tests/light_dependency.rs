//! A program that only marks regions depends on `roofline` with `default-features = false`
//! (tests/fixtures/light-dependent): its dependency tree holds none of the heavy crates the
//! CLI, GPU, plotting and trace features bring. `cargo tree` only resolves (no build), with
//! the workspace's Cargo.lock so the versions are the ones already fetched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates a regions-only dependent must not pull in.
const HEAVY: &[&str] = &[
    "cudarc",
    "plotters",
    "plotters-backend",
    "ab_glyph",
    "iced-x86",
    "clap",
    "indicatif",
    "addr2line",
    "gimli",
    "cpp_demangle",
];

/// Crates a regions-only dependent does not compile at all (docs/region-api.md, "A light
/// dependency", what the build time was spent on): TOML (the platform tables are embedded as
/// Rust data, which build.rs writes with its own TOML reader: it has no dependencies) and the Rust
/// demangler (symbol names of the trace backend).
const NOT_LINKED: &[&str] = &["toml", "toml_parser", "winnow", "serde_spanned", "rustc-demangle"];

/// Every crate a regions-only dependent compiles (normal and build edges), the program and
/// roofline included: docs/region-api.md ("A light dependency") measures each one's share. A crate
/// added here lengthens every user's clean build, so the list changes on purpose only.
const LIGHT_TREE: &[&str] = &[
    "autocfg",
    "bitflags",
    "c-enum",
    "cfg-if",
    "cfg_aliases",
    "itoa",
    "libc",
    "light-dependent",
    "memchr",
    "memmap2",
    "memoffset",
    "nix",
    "perf-event-data",
    "perf-event-open-sys2",
    "perf-event2",
    "proc-macro2",
    "quote",
    "raw-cpuid",
    "roofline",
    "roofline-kernels",
    "roofline-marker",
    "serde",
    "serde_core",
    "serde_derive",
    "serde_json",
    "syn",
    "thiserror",
    "thiserror-impl",
    "unicode-ident",
    "zmij",
];

/// A copy of the fixture in `dir` whose dependency points at this checkout.
fn fixture_copy(dir: &Path) -> PathBuf {
    copy_of("light-dependent", "../../..", "", dir)
}

/// A copy of fixture `name` in `dir`, its dependency path `rel` pointing at this checkout's
/// `sub` directory.
fn copy_of(name: &str, rel: &str, sub: &str, dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture = root.join("tests/fixtures").join(name);
    let manifest = std::fs::read_to_string(fixture.join("Cargo.toml")).unwrap();
    let by_path = format!("path = \"{rel}\"");
    assert!(manifest.contains(&by_path), "the fixture names its dependency by relative path");
    let manifest = manifest.replace(&by_path, &format!("path = {:?}", root.join(sub).display().to_string()));
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::copy(fixture.join("src/main.rs"), dir.join("src/main.rs")).unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    dir.join("Cargo.toml")
}

/// The crate names of the fixture's tree (normal and build edges), with `features` enabled.
fn tree(manifest: &Path, features: &[&str]) -> Vec<String> {
    tree_edges(manifest, features, "normal,build")
}

/// The crate names of the fixture's tree along `edges` (`normal`: what its program links).
fn tree_edges(manifest: &Path, features: &[&str], edges: &str) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.args(["tree", "--offline", "--prefix", "none", "-e", edges, "--manifest-path"])
        .arg(manifest);
    if !features.is_empty() {
        c.arg("--features").arg(features.join(","));
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "cargo tree failed (the workspace's dependencies must be fetched, e.g. by `cargo build`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The features `roofline-kernels` is built with in the fixture's tree.
fn kernel_features(manifest: &Path, features: &[&str]) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.args([
        "tree",
        "--offline",
        "--prefix",
        "none",
        "-e",
        "normal",
        "--format",
        "{p} [{f}]",
        "-i",
        "roofline-kernels",
        "--manifest-path",
    ])
    .arg(manifest);
    if !features.is_empty() {
        c.arg("--features").arg(features.join(","));
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("roofline-kernels"))
        .expect("roofline-kernels in the tree");
    let inside = &line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()];
    let mut f: Vec<String> = inside
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    f.sort();
    f
}

#[test]
fn a_regions_only_dependent_pulls_none_of_the_heavy_crates() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = fixture_copy(dir.path());
    let light = tree(&manifest, &[]);
    // What it needs is there: the library, the perf path, the schema.
    for needed in ["light-dependent", "roofline", "perf-event2", "serde_json"] {
        assert!(light.iter().any(|n| n == needed), "{needed} missing from {light:?}");
    }
    let heavy: Vec<&&str> = HEAVY.iter().filter(|h| light.iter().any(|n| n == **h)).collect();
    assert!(heavy.is_empty(), "default-features = false pulls in {heavy:?}: {light:?}");
    // What it compiles, build script included: no TOML parser, no demangler.
    let not_linked: Vec<&&str> = NOT_LINKED.iter().filter(|h| light.iter().any(|n| n == **h)).collect();
    assert!(not_linked.is_empty(), "default-features = false compiles {not_linked:?}: {light:?}");
    // The kernel crate comes for its vocabulary (FlopClass, Counts) only, not the suite.
    assert_eq!(kernel_features(&manifest, &[]), Vec::<String>::new());
    assert_eq!(kernel_features(&manifest, &["roofline/analysis"]), vec!["suite".to_string()]);

    // Each feature brings its crates back, so the check above can see them.
    for (feature, brings) in [
        ("roofline/plot", &["plotters", "plotters-backend", "ab_glyph"][..]),
        ("roofline/trace", &["iced-x86"][..]),
        ("roofline/gpu", &["cudarc"][..]),
        ("roofline/analysis", &["cpp_demangle"][..]),
        ("roofline/cli", HEAVY),
    ] {
        let with = tree(&manifest, &[feature]);
        for b in brings {
            assert!(with.iter().any(|n| n == b), "{feature} does not bring {b}: {with:?}");
        }
    }
    // ... and links what the light build leaves out: TOML files with `analysis` (platform
    // files, gate rules), the demangler with `trace`.
    for (feature, links) in [
        ("roofline/analysis", &["toml", "toml_parser"][..]),
        ("roofline/trace", &["rustc-demangle"][..]),
    ] {
        let with = tree_edges(&manifest, &[feature], "normal");
        for l in links {
            assert!(with.iter().any(|n| n == l), "{feature} does not link {l}: {with:?}");
        }
    }
}

#[test]
fn a_regions_only_dependent_compiles_exactly_the_listed_crates() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = fixture_copy(dir.path());
    let light = tree(&manifest, &[]);
    let added: Vec<&String> = light.iter().filter(|n| !LIGHT_TREE.contains(&n.as_str())).collect();
    let gone: Vec<&&str> = LIGHT_TREE.iter().filter(|n| !light.iter().any(|l| l == **n)).collect();
    assert!(
        added.is_empty() && gone.is_empty(),
        "the light tree changed: added {added:?}, gone {gone:?} (measure the clean build and update LIGHT_TREE and docs/region-api.md)"
    );
    // The list is not vacuous: a feature's crates are outside it.
    let with_plot = tree(&manifest, &["roofline/plot"]);
    assert!(with_plot.iter().any(|n| !LIGHT_TREE.contains(&n.as_str())));
}

/// A program profiled only from outside marks its regions with roofline-marker, which
/// compiles nothing else: no serde, no perf, no libc crate (docs/region-api.md, "The marker
/// crate"), and roofline itself links the same crate for its marker symbols.
#[test]
fn the_marker_crate_compiles_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = copy_of("marker-dependent", "../../../marker", "marker", dir.path());
    let marker = tree(&manifest, &[]);
    assert_eq!(marker, ["marker-dependent", "roofline-marker"], "the marker crate pulls in more");
    let light_dir = tempfile::tempdir().unwrap();
    let light = tree(&fixture_copy(light_dir.path()), &[]);
    assert!(light.iter().any(|n| n == "roofline-marker"), "{light:?}");
}
