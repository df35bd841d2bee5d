//! Embeds every `platforms/*.toml` into the binary so a fresh install works without the
//! source tree (a user can still pass their own file with `--platform FILE`): the TOML text
//! (its digest is the tables' version), and the tables as Rust data, which is what the library
//! reads (OUT_DIR/platform_tables.rs, written by build/platform_tables.rs). No dependencies:
//! the TOML is read by build/toml_subset.rs.

use std::{env, fs, path::Path};

#[path = "build/platform_tables.rs"]
mod platform_tables;
#[path = "build/toml_subset.rs"]
mod toml_subset;

fn main() {
    let dir = Path::new("platforms");
    println!("cargo:rerun-if-changed=platforms");
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".toml"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let out_dir = env::var("OUT_DIR").unwrap();
    let files: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            let text = fs::read_to_string(dir.join(n)).expect("platform file");
            (n.trim_end_matches(".toml").to_string(), text)
        })
        .collect();
    let tables = platform_tables::rust(&files);
    fs::write(Path::new(&out_dir).join("platform_tables.rs"), tables).expect("write platform_tables.rs");
    let mut out =
        String::from("/// (file stem, TOML text) of every embedded platform file.\npub const EMBEDDED_PLATFORMS: &[(&str, &str)] = &[\n");
    for n in &names {
        let stem = n.trim_end_matches(".toml");
        let abs = fs::canonicalize(dir.join(n)).expect("platform file path");
        println!("cargo:rerun-if-changed={}", abs.display());
        out.push_str(&format!("    ({stem:?}, include_str!({:?})),\n", abs.display().to_string()));
    }
    out.push_str("];\n");
    // The tables' version: a digest of every file's name and text, so `roofline --version`
    // tells which tables a binary carries (they change without the crate version changing).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for n in &names {
        let text = fs::read(dir.join(n)).expect("platform file");
        for b in n.trim_end_matches(".toml").bytes().chain([0]).chain(text).chain([0]) {
            hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    out.push_str(&format!(
        "/// FNV-1a 64 of every embedded platform file (stem, NUL, text, NUL; sorted by name).\npub const EMBEDDED_PLATFORMS_DIGEST: &str = \"{hash:016x}\";\n"
    ));
    let dest = Path::new(&out_dir).join("embedded_platforms.rs");
    fs::write(dest, out).expect("write embedded_platforms.rs");
    // Git SHA for `--version` and the report's environment, only when this crate's own
    // directory is the top of a git work tree: a tarball unpacked inside some other repository
    // (or a `cargo install` from a registry) must not borrow that repository's SHA, and a build
    // without git or without .git simply has none ("unknown" at run time).
    if let Some(sha) = own_git_sha() {
        println!("cargo:rustc-env=ROOFLINE_GIT_SHA={sha}");
        // HEAD names the branch; the branch's ref (or packed-refs) moves with each commit.
        // `git rev-parse --git-path` finds them in a linked worktree too (where .git is a
        // file). Only files that exist are named: cargo treats a missing one as always
        // changed, which would rebuild this crate (and every dependent) on every build.
        let rerun_if_exists = |p: &str| {
            if Path::new(p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        };
        if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
            rerun_if_exists(&head);
            if let Ok(text) = fs::read_to_string(&head)
                && let Some(r) = text.strip_prefix("ref: ")
                && let Some(branch) = git(&["rev-parse", "--git-path", r.trim()])
            {
                rerun_if_exists(&branch);
            }
        }
        if let Some(packed) = git(&["rev-parse", "--git-path", "packed-refs"]) {
            rerun_if_exists(&packed);
        }
    }
    // The compiler of the suite's own kernels, for the report's environment.
    if let Ok(o) = std::process::Command::new(env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        && o.status.success()
    {
        println!(
            "cargo:rustc-env=ROOFLINE_RUSTC_VERSION={}",
            String::from_utf8_lossy(&o.stdout).trim()
        );
    }
}

/// One line of `git` output run in the crate directory, or None (no git, not a repository,
/// failure).
fn git(args: &[&str]) -> Option<String> {
    let o = std::process::Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
    (o.status.success() && !text.is_empty()).then_some(text)
}

/// The short SHA of HEAD when the crate directory is itself the top of a git work tree.
fn own_git_sha() -> Option<String> {
    let top = fs::canonicalize(git(&["rev-parse", "--show-toplevel"])?).ok()?;
    let here = fs::canonicalize(env::var("CARGO_MANIFEST_DIR").ok()?).ok()?;
    if top != here {
        return None;
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}
