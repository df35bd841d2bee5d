//! Embeds every `platforms/*.toml` into the binary so a fresh install works without the
//! source tree (a user can still pass their own file with `--platform FILE`).

use std::{env, fs, path::Path};

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
    let mut out =
        String::from("/// (file stem, TOML text) of every embedded platform file.\npub const EMBEDDED_PLATFORMS: &[(&str, &str)] = &[\n");
    for n in &names {
        let stem = n.trim_end_matches(".toml");
        let abs = fs::canonicalize(dir.join(n)).expect("platform file path");
        println!("cargo:rerun-if-changed={}", abs.display());
        out.push_str(&format!("    ({stem:?}, include_str!({:?})),\n", abs.display().to_string()));
    }
    out.push_str("];\n");
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("embedded_platforms.rs");
    fs::write(dest, out).expect("write embedded_platforms.rs");
    // Git SHA for the report's environment, when built from a checkout.
    if let Ok(o) = std::process::Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output()
        && o.status.success()
    {
        println!("cargo:rustc-env=ROOFLINE_GIT_SHA={}", String::from_utf8_lossy(&o.stdout).trim());
    }
    // HEAD names the branch; the branch's ref (or packed-refs) moves with each commit. Only
    // files that exist are named: cargo treats a missing one as always changed, which would
    // rebuild this crate (and every crate depending on it) on every build.
    let rerun_if_exists = |p: &str| {
        if Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    rerun_if_exists(".git/HEAD");
    if let Ok(head) = fs::read_to_string(".git/HEAD")
        && let Some(r) = head.strip_prefix("ref: ")
    {
        rerun_if_exists(&format!(".git/{}", r.trim()));
    }
    rerun_if_exists(".git/packed-refs");
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
