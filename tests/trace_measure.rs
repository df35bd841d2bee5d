//! `roofline measure --backend trace` from the outside: native timing after the trace, the
//! per-function table, prefetch and scatter bytes, errors, signals, Fortran. Programs are
//! written here and compiled with `cc` / `gfortran`; a test skips (with a message) when its
//! compiler or CPU feature is missing. Sizes are random per run (printed), expected counts are
//! worked out by hand from the pinned instructions, never copied from an output.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The region markers of the roofline library, defined the way fp_known.c does: each test's
/// work lies between them (the whole run, also counted, adds the start-up around it).
const MARKERS: &str = r#"
__attribute__((noinline, used)) void roofline_region_begin(const char *name) { __asm__ volatile("" ::"r"(name)); }
__attribute__((noinline, used)) void roofline_region_end(const char *name) { __asm__ volatile("" ::"r"(name)); }
"#;

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

/// Compile `src` (C or Fortran by `compiler`) to `dir/out`; None (and a message) on failure.
fn build(dir: &Path, compiler: &str, ext: &str, src: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let file = dir.join(format!("{out}.{ext}"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.join(out);
    match std::process::Command::new(compiler)
        .current_dir(dir)
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&file)
        .output()
    {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => {
            eprintln!("skipping: {compiler} {out} failed: {}", String::from_utf8_lossy(&o.stderr));
            None
        }
        Err(e) => {
            eprintln!("skipping: no {compiler} ({e})");
            None
        }
    }
}

fn cc(dir: &Path, src: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let mut f = vec!["-O2"];
    f.extend_from_slice(flags);
    build(dir, "cc", "c", &format!("{MARKERS}\n{src}"), out, &f)
}

/// A size in [lo, hi), different per run and per `salt` (printed).
fn size(lo: u64, hi: u64, salt: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x = t ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    let n = lo + x % (hi - lo);
    eprintln!("size {n} (salt {salt})");
    n
}

/// `roofline measure --backend trace ARGS -o m.json -- CMD`: the report's first point (the
/// whole run), and roofline's stdout.
fn measure(dir: &Path, args: &[&str], cmd: &[&str]) -> (Value, String) {
    let (doc, stdout) = measure_doc(dir, args, cmd);
    (doc["points"][0].clone(), stdout)
}

/// [`measure`]'s whole report (the whole run's point, then one per region).
fn measure_doc(dir: &Path, args: &[&str], cmd: &[&str]) -> (Value, String) {
    let out = dir.join("m.json");
    let a = roofline()
        .args(["measure", "--backend", "trace"])
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(cmd)
        .timeout(std::time::Duration::from_secs(120))
        .assert();
    let o = a.get_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (v, String::from_utf8_lossy(&o.stdout).into_owned())
}

fn row<'a>(p: &'a Value, name: &str) -> &'a Value {
    p["extra"]["by_function"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"].as_str().unwrap().starts_with(&format!("{name} (")))
        .unwrap_or_else(|| panic!("no function {name} in {:#}", p["extra"]["by_function"]))
}

#[test]
fn repeat_traces_once_then_times_native_runs() {
    // Every run appends a line to a log: one traced run plus R native ones. Inside the region,
    // n pinned `addsd` (1 scalar_double flop each, 8 B loaded).
    let src = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void adds(long n, const double *x) {
    for (long i = 0; i < n; i++) __asm__ volatile("addsd (%0), %%xmm0" ::"r"(x) : "xmm0", "memory");
}
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "a");
    if (!f) return 4;
    fputs("run\n", f);
    fclose(f);
    long n = atol(argv[2]);
    static double x[1] = {1.0};
    roofline_region_begin("r");
    adds(n, x);
    roofline_region_end("r");
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cc(dir.path(), src, "rep", &[]) else { return };
    let log = dir.path().join("runs.log");
    let n = size(100, 5000, 1);
    let r = size(2, 6, 2);
    let (p, stdout) = measure(
        dir.path(),
        &["--repeat", &r.to_string()],
        &[exe.to_str().unwrap(), log.to_str().unwrap(), &n.to_string()],
    );
    let runs = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    assert_eq!(runs, r + 1, "one traced run and {r} native runs");
    assert_eq!(p["seconds_samples"].as_array().unwrap().len() as u64, r);
    assert!(p["seconds_samples"].as_array().unwrap().iter().all(|s| s.as_f64().unwrap() > 0.0));
    assert!(p["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(p["provenance"]["seconds"], "native");
    assert_eq!(p["provenance"]["flops"], "trace");
    assert_eq!(p["flops"]["by_class"]["scalar_double"].as_f64(), Some(n as f64));
    assert_eq!(p["flops"]["total"].as_f64(), Some(n as f64));
    assert!(stdout.contains(&format!("(median of {r})")), "{stdout}");
}

#[test]
fn sigterm_exits_143_and_writes_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let a = roofline()
        .args(["measure", "--backend", "trace", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(143);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("SIGTERM"), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_file_that_is_no_program_is_named_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plain.txt"), "just text").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    for backend in ["trace", "auto"] {
        for (cmd, why) in [("./plain.txt", "is not executable"), ("./sub", "is a directory")] {
            let a = roofline()
                .current_dir(dir.path())
                .args(["measure", "--backend", backend, "--", cmd])
                .assert()
                .code(2);
            let o = a.get_output();
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(err.starts_with("roofline: "), "{err}");
            assert!(err.contains(&format!("{cmd} {why}")), "{backend} {cmd}: {err}");
            assert!(!err.contains("command not found"), "{err}");
            assert!(o.stdout.is_empty());
        }
    }
}

#[test]
fn by_function_prints_a_table_sorted_by_flops() {
    // adds: n1 × addsd = n1 scalar flops, 8 B each; muls: n2 × mulpd = 2·n2 flops, 16 B each.
    let src = r#"
#include <stdlib.h>
__attribute__((noinline)) void adds(long n, const double *x) {
    for (long i = 0; i < n; i++) __asm__ volatile("addsd (%0), %%xmm0" ::"r"(x) : "xmm0", "memory");
}
__attribute__((noinline)) void muls(long n, const double *x) {
    for (long i = 0; i < n; i++) __asm__ volatile("mulpd (%0), %%xmm1" ::"r"(x) : "xmm1", "memory");
}
int main(int argc, char **argv) {
    static double x[2] __attribute__((aligned(16))) = {1.0, 1.0};
    long n1 = atol(argv[1]), n2 = atol(argv[2]);
    roofline_region_begin("r");
    adds(n1, x);
    muls(n2, x);
    roofline_region_end("r");
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cc(dir.path(), src, "byf", &[]) else { return };
    // Either may have more flops: the table follows the counts.
    let n1 = size(100, 6000, 3);
    let n2 = size(50, 3000, 4);
    let (p, stdout) = measure(
        dir.path(),
        &["--by-function"],
        &[exe.to_str().unwrap(), &n1.to_string(), &n2.to_string()],
    );
    let total = n1 + 2 * n2;
    assert_eq!(p["flops"]["total"].as_f64(), Some(total as f64));
    assert_eq!(row(&p, "adds")["flops"].as_u64(), Some(n1));
    assert_eq!(row(&p, "muls")["flops"].as_u64(), Some(2 * n2));
    // The text table: function, instructions, flops, core bytes, share.
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.trim_start().starts_with("function") && l.contains("core bytes") && l.contains("share"))
        .unwrap_or_else(|| panic!("no per-function table in:\n{stdout}"));
    let fields = |name: &str| -> (usize, Vec<String>) {
        let i = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{name} (")))
            .unwrap_or_else(|| panic!("no row {name} in:\n{stdout}"));
        let f: Vec<String> = lines[i].split_whitespace().map(str::to_string).collect();
        (i, f[f.len() - 4..].to_vec())
    };
    let (ia, a) = fields("adds");
    let (im, m) = fields("muls");
    assert!(ia > header && im > header);
    let share = |f: u64| format!("{:.1}%", 100.0 * f as f64 / total as f64);
    assert_eq!(a[1..], [n1.to_string(), (8 * n1).to_string(), share(n1)]);
    assert_eq!(m[1..], [(2 * n2).to_string(), (16 * n2).to_string(), share(2 * n2)]);
    assert!(
        a[0].parse::<u64>().unwrap() >= 2 * n1,
        "at least the asm and the branch per iteration"
    );
    assert!(m[0].parse::<u64>().unwrap() >= 2 * n2);
    // Most flops first.
    if n1 != 2 * n2 {
        assert_eq!(ia < im, n1 > 2 * n2, "adds {n1} flops vs muls {}:\n{stdout}", 2 * n2);
    }
}

/// n × prefetcht0 of consecutive lines inside the region.
const PREFETCH: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) void prefetch_lines(long n, const char *p) {
    for (long i = 0; i < n; i++) __asm__ volatile("prefetcht0 (%0)" ::"r"(p + 64 * i) : "memory");
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    char *p = aligned_alloc(64, 64 * n + 64);
    roofline_region_begin("r");
    prefetch_lines(n, p);
    roofline_region_end("r");
    return p == 0;
}
"#;

#[test]
fn prefetches_are_64_bytes_each_and_not_core_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cc(dir.path(), PREFETCH, "pf", &[]) else { return };
    let n = size(100, 20_000, 5);
    let (p, _) = measure(dir.path(), &["--by-function"], &[exe.to_str().unwrap(), &n.to_string()]);
    assert_eq!(p["extra"]["prefetch_bytes"].as_u64(), Some(64 * n));
    assert_eq!(row(&p, "prefetch_lines")["core_bytes"].as_u64(), Some(0));
    assert_eq!(p["flops"]["total"].as_f64(), Some(0.0));
}

#[test]
fn memory_mode_notes_once_and_names_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cc(dir.path(), PREFETCH, "pfm", &[]) else { return };
    let n = size(50, 400, 6);
    let (doc, stdout) = measure_doc(
        dir.path(),
        &["--trace", "memory", "--cache", "L1=32KiB:8:plru,L2=1MiB:16,L3=4MiB:16:inclusive"],
        &[exe.to_str().unwrap(), &n.to_string()],
    );
    let p = &doc["points"][0];
    assert_eq!(p["extra"]["prefetch_bytes"].as_u64(), Some(64 * n));
    let notes: Vec<&str> = p["provenance"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let sim: Vec<&&str> = notes.iter().filter(|n| n.contains("cache traffic simulated")).collect();
    assert_eq!(sim.len(), 1, "{notes:?}");
    assert_eq!(notes.iter().filter(|n| n.contains("prefetchers")).count(), 1, "{notes:?}");
    assert!(sim[0].contains("L1 32.0 KiB 8-way tree-PLRU"), "{}", sim[0]);
    assert!(sim[0].contains("L2 1.0 MiB 16-way LRU"), "{}", sim[0]);
    assert!(
        sim[0].contains("inclusive last level") && !sim[0].contains("non-inclusive"),
        "{}",
        sim[0]
    );
    assert_eq!(stdout.matches("cache traffic simulated").count(), 1, "{stdout}");
    // The n prefetched lines were never touched before the region: each is filled into L1
    // inside its window (the whole run also has the start-up's lines). Each fill may also
    // evict a line the start-up left dirty in L1, written back to L2 inside the window: at
    // most one per fill, and at most the L1's 512 lines (how many are dirty depends on the
    // C library's start-up paths: 70-110 lines on a Granite Rapids guest, fewer on Zen 4).
    // The region's own stack (a line or two) adds its fills and write-backs.
    let r = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "r")
        .expect("region r");
    let l2 = r["bytes"]["l2"].as_f64().unwrap() as u64;
    let most = 64 * n + 64 * n.min(512) + 4 * 64;
    assert!(l2 >= 64 * n && l2 <= most, "l2 {l2} for {n} prefetched lines (at most {most})");
    // Nothing else: DRAM and L3 see the n lines exactly once (the L3 holds the start-up).
    assert_eq!(r["bytes"]["dram"].as_f64(), Some((64 * n) as f64), "{r}");
    assert!(
        p["bytes"]["l2"].as_f64().unwrap() as u64 >= l2,
        "the whole run has the region's lines"
    );
}

#[test]
fn cache_without_trace_memory_is_refused() {
    let a = roofline()
        .args(["measure", "--backend", "trace", "--cache", "L1=32KiB:8", "--", "true"])
        .assert()
        .code(2);
    let o = a.get_output();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.starts_with("roofline: ") && err.contains("--trace memory"), "{err}");
    assert!(err.lines().count() <= 2, "cause + hint: {err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn avx512_scatter_bytes_per_active_element() {
    if !std::arch::is_x86_feature_detected!("avx512f") {
        eprintln!("skipping: this CPU has no AVX-512");
        return;
    }
    // Per iteration: a 32-byte index load, then 8 doubles scattered (all lanes: 64 B) in
    // `scatter_all`; only the lanes of `mask` (8 B each) in `scatter_masked`. A scatter clears
    // its mask, so the mask is set again every iteration.
    let src = r#"
#include <stdlib.h>
static int idx[8] __attribute__((aligned(32))) = {0, 9, 2, 11, 4, 13, 6, 15};
__attribute__((noinline, target("avx512f"))) void scatter_all(long n, double *base) {
    for (long i = 0; i < n; i++)
        __asm__ volatile("vmovdqu (%1), %%ymm1\n\tkxnorw %%k1, %%k1, %%k1\n\tvscatterdpd %%zmm0, (%0,%%ymm1,8)%{%%k1%}"
                         ::"r"(base), "r"(idx) : "xmm1", "k1", "memory");
}
__attribute__((noinline, target("avx512f"))) void scatter_masked(long n, double *base, unsigned mask) {
    for (long i = 0; i < n; i++)
        __asm__ volatile("vmovdqu (%1), %%ymm1\n\tkmovw %2, %%k1\n\tvscatterdpd %%zmm0, (%0,%%ymm1,8)%{%%k1%}"
                         ::"r"(base), "r"(idx), "r"(mask) : "xmm1", "k1", "memory");
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    unsigned mask = (unsigned)atol(argv[2]);
    double *base = aligned_alloc(64, 64 * 8);
    roofline_region_begin("r");
    scatter_all(n, base);
    scatter_masked(n, base, mask);
    roofline_region_end("r");
    return base == 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cc(dir.path(), src, "sc", &[]) else { return };
    let n = size(50, 2000, 7);
    let mask = size(0, 256, 8);
    let (p, _) = measure(
        dir.path(),
        &["--by-function"],
        &[exe.to_str().unwrap(), &n.to_string(), &mask.to_string()],
    );
    let active = u64::from((mask as u8).count_ones());
    assert_eq!(row(&p, "scatter_all")["core_bytes"].as_u64(), Some(32 * n + 64 * n));
    assert_eq!(row(&p, "scatter_masked")["core_bytes"].as_u64(), Some(32 * n + 8 * active * n));
}

#[test]
fn fortran_daxpy_is_two_flops_per_element() {
    // The region markers as bind(C) procedures touching a volatile (an empty one is found
    // pure and its call deleted); -fno-inline keeps the calls and daxpy a function of its own.
    let src = r#"
module marks
  integer, volatile :: depth = 0
end module
subroutine region_begin() bind(C, name="roofline_region_begin")
  use marks
  depth = depth + 1
end subroutine
subroutine region_end() bind(C, name="roofline_region_end")
  use marks
  depth = depth - 1
end subroutine
subroutine daxpy(n, a, x, y)
  integer, intent(in) :: n
  double precision, intent(in) :: a, x(n)
  double precision, intent(inout) :: y(n)
  integer :: i
  do i = 1, n
    y(i) = a * x(i) + y(i)
  end do
end subroutine
program main
  implicit none
  interface
    subroutine region_begin() bind(C, name="roofline_region_begin")
    end subroutine
    subroutine region_end() bind(C, name="roofline_region_end")
    end subroutine
    subroutine daxpy(n, a, x, y)
      integer, intent(in) :: n
      double precision, intent(in) :: a, x(n)
      double precision, intent(inout) :: y(n)
    end subroutine
  end interface
  character(len=32) :: arg
  integer :: n, i
  double precision, allocatable :: x(:), y(:)
  call get_command_argument(1, arg)
  read (arg, *) n
  allocate (x(n), y(n))
  do i = 1, n
    x(i) = i
    y(i) = 1.0d0
  end do
  call region_begin()
  call daxpy(n, 2.0d0, x, y)
  call region_end()
  if (y(n / 2 + 1) < 0.0d0) stop 3
end program
"#;
    let dir = tempfile::tempdir().unwrap();
    // -J: the module file goes to the temporary directory, not the working directory.
    let modules = dir.path().to_str().unwrap();
    let Some(exe) = build(dir.path(), "gfortran", "f90", src, "daxpy", &["-O2", "-fno-inline", "-J", modules]) else {
        return;
    };
    let n = size(100, 50_000, 9);
    let (p, _) = measure(dir.path(), &["--by-function"], &[exe.to_str().unwrap(), &n.to_string()]);
    assert_eq!(p["flops"]["total"].as_f64(), Some(2.0 * n as f64), "{:#}", p["flops"]);
    let d = row(&p, "daxpy_");
    assert_eq!(d["flops"].as_u64(), Some(2 * n));
    // x and y loaded, y stored: 24 B per element, plus a and n read through their references.
    let core = d["core_bytes"].as_u64().unwrap();
    assert!(core >= 24 * n && core <= 24 * n + 64, "core {core} for n = {n}");
}

#[test]
fn json_on_stdout_stays_valid_when_the_command_prints_megabytes() {
    // The command writes MiBs to its stdout; with --json the document is all that stdout
    // carries (the command's output goes to stderr), through the traced run and the native
    // repetitions alike.
    let dir = tempfile::tempdir().unwrap();
    let src = r#"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    char *b = malloc(n);
    memset(b, 'x', n);
    for (long done = 0; done < n;) { long w = write(1, b + done, n - done); if (w <= 0) return 1; done += w; }
    return 0;
}
"#;
    let Some(exe) = cc(dir.path(), src, "loud", &[]) else { return };
    let n = size(2 << 20, 4 << 20, 77);
    let o = roofline()
        .args(["measure", "--backend", "trace", "--repeat", "2", "--json", "--"])
        .arg(&exe)
        .arg(n.to_string())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert!(doc["points"].as_array().is_some_and(|p| p.len() == 1), "{doc}");
    // The three runs' output (one traced, two native) went to stderr.
    let xs = o.stderr.iter().filter(|b| **b == b'x').count() as u64;
    assert_eq!(xs, 3 * n, "the command's stdout, on stderr");
}
