//! Small shared helpers: thread lists, byte sizes, atomic file output, sorting and maps
//! without a copy of the standard sort per call site.

use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Parse `--threads`: `1`, `1,2`, `1-4`, or `all`, checked against the CPUs we may run on.
#[cfg(feature = "cli")]
pub fn parse_threads(spec: &str, available: usize) -> Result<Vec<usize>> {
    let bad = |why: String| {
        Error::input(
            format!("--threads '{spec}': {why}"),
            format!("use e.g. 1, 1,2, 1-{available} or all (this machine: {available} CPUs)"),
        )
    };
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim) {
        if part.eq_ignore_ascii_case("all") {
            out.push(available);
            continue;
        }
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad(format!("'{part}' is not a range")))?;
            let b: usize = b.trim().parse().map_err(|_| bad(format!("'{part}' is not a range")))?;
            if a == 0 || b < a {
                return Err(bad(format!("'{part}' is not a valid range")));
            }
            out.extend(a..=b);
            continue;
        }
        let n: usize = part.parse().map_err(|_| bad(format!("'{part}' is not a number")))?;
        out.push(n);
    }
    if out.is_empty() {
        return Err(bad("empty list".into()));
    }
    for &n in &out {
        if n == 0 {
            return Err(bad("0 threads".into()));
        }
        if n > available {
            return Err(bad(format!("{n} threads but only {available} CPUs are available")));
        }
    }
    sort_by(&mut out, Ord::cmp);
    out.dedup();
    Ok(out)
}

/// Sort `v` stably by `cmp`, with the result of `slice::sort_by`. Each `sort_by`,
/// `sort_by_key` or `sort` call site compiles its own copy of the standard sort (about 2 000
/// lines of LLVM IR for each element type and comparison), and a regions-only dependent builds
/// this crate at opt-level 3 (docs/region-api.md, "A light dependency"): here one copy, on
/// indices, serves every call, and the elements are then moved into place.
pub fn sort_by<T>(v: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) {
    let order = stable_order(v.len(), &|a, b| cmp(&v[a], &v[b]));
    permute(v, order);
}

/// Sort `v` stably by `key`, with the result of `slice::sort_by_key` (see [`sort_by`]).
pub fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// The indices `0..n` in the stable order `cmp` gives them: the crate's one instantiation of
/// the standard sort.
fn stable_order(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Reorder `v` so that position k holds what was at `order[k]` (`order` a permutation of
/// `v`'s indices), one cycle of the permutation at a time.
fn permute<T>(v: &mut [T], mut order: Vec<usize>) {
    for start in 0..v.len() {
        let mut at = start;
        loop {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

/// A map of `pairs`, a repeated key keeping its last value as `collect` does, built by
/// insertion: `collect` into a `BTreeMap` sorts the pairs first, with a copy of the standard
/// sort per call site (see [`sort_by`]).
pub fn map_of<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut m = BTreeMap::new();
    m.extend(pairs);
    m
}

/// Seconds since the Unix epoch (0 where the clock is set before it).
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Parse a byte size: `4096`, `4KiB`, `64MiB`, `1GiB`, `2kB`, `1.5MiB`.
#[cfg(feature = "analysis")]
pub fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || Error::input(format!("'{s}' is not a byte size"), "use e.g. 4096, 32KiB, 64MiB or 1GiB");
    let x: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        "t" | "tib" => 1024f64.powi(4),
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let v = x * mult;
    if !v.is_finite() || !(1.0..=1.0e18).contains(&v) {
        return Err(bad());
    }
    Ok(v.round() as u64)
}

/// An output file checked before any measuring and written atomically (temp file + rename),
/// so nothing half-written is ever left behind.
#[cfg(feature = "cli")]
#[derive(Debug, Clone)]
pub struct OutputFile {
    pub path: PathBuf,
}

#[cfg(feature = "cli")]
impl OutputFile {
    /// Check that `path` can be written: its directory exists and is writable, and its
    /// extension is one of `allowed`. Returns the lower-case extension.
    pub fn check(path: &Path, allowed: &[&str]) -> Result<(OutputFile, String)> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .unwrap_or_default();
        if !allowed.contains(&ext.as_str()) {
            return Err(Error::input(
                format!("-o {}: unsupported extension '{}'", path.display(), ext),
                format!(
                    "this command writes {}",
                    allowed.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(Error::input(
                format!("-o {}: directory {} does not exist", path.display(), dir.display()),
                "create it first or choose another path",
            ));
        }
        // Probe writability with a temp file in the same directory (rename target dir).
        let probe = dir.join(format!(".roofline-probe-{}", std::process::id()));
        match std::fs::File::create(&probe) {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
            }
            Err(e) => {
                return Err(Error::input(
                    format!("-o {}: cannot write in {} ({e})", path.display(), dir.display()),
                    "choose a writable directory",
                ));
            }
        }
        if path.is_dir() {
            return Err(Error::input(format!("-o {}: is a directory", path.display()), "name a file"));
        }
        Ok((OutputFile { path: path.to_path_buf() }, ext))
    }

    /// Write all bytes to a temp file beside the target, then rename over it.
    pub fn write(&self, data: &[u8]) -> Result<()> {
        write_atomic(&self.path, data)
    }
}

pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    // A device or a FIFO (`-o /dev/null`, `-o /dev/stdout`, a named pipe) is written in place:
    // renaming a temporary file over it would replace /dev/null with a regular file for every
    // program on the machine.
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
        && !m.is_dir()
    {
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(data))
            .map_err(|e| Error::io(format!("writing {}", path.display()), e));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        // No fsync: the rename alone makes readers see the whole file or the old one, which is
        // what "nothing half-written" asks; surviving a power cut does not need a report to
        // wait for the disk (1.5 s on a loaded VM's disk, longer than many measured runs).
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(format!("writing {}", path.display()), e));
    }
    Ok(())
}

/// A progress bar on stderr (indicatif) with the `cli` feature; without it (a library that
/// only marks regions) nothing is shown and indicatif is not linked.
pub struct Progress {
    #[cfg(feature = "cli")]
    bar: indicatif::ProgressBar,
}

impl Progress {
    /// `len` steps drawn with `template` (indicatif's syntax) when `show`, else hidden.
    #[cfg_attr(not(feature = "cli"), allow(unused_variables))]
    pub fn new(show: bool, len: u64, template: &str) -> Progress {
        #[cfg(feature = "cli")]
        {
            let bar = if show {
                indicatif::ProgressBar::new(len)
            } else {
                indicatif::ProgressBar::hidden()
            };
            bar.set_style(indicatif::ProgressStyle::with_template(template).unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
            Progress { bar }
        }
        #[cfg(not(feature = "cli"))]
        Progress {}
    }

    #[cfg_attr(not(feature = "cli"), allow(unused_variables))]
    pub fn set_message(&self, msg: impl Into<std::borrow::Cow<'static, str>>) {
        #[cfg(feature = "cli")]
        self.bar.set_message(msg);
    }

    #[cfg_attr(not(feature = "cli"), allow(unused_variables))]
    pub fn inc(&self, n: u64) {
        #[cfg(feature = "cli")]
        self.bar.inc(n);
    }

    pub fn finish_and_clear(&self) {
        #[cfg(feature = "cli")]
        self.bar.finish_and_clear();
    }
}

/// This tool's cache directory: `$XDG_CACHE_HOME/roofline`, else `~/.cache/roofline` (the
/// ceilings, the counters' trust table, GPU ceilings).
pub fn cache_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".cache"),
    };
    Some(base.join("roofline"))
}

/// Random numbers for tests (xorshift64), another sequence in every run: the process id is
/// mixed into `seed`, and a failure prints the inputs it failed on. (The trace backend's tests
/// use it.)
#[cfg(all(test, feature = "trace"))]
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed ^ u64::from(std::process::id());
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_by_orders_as_the_standard_stable_sort_does() {
        let mut rng = crate::kernels::rng::Rng::new(0x5eed_0f50);
        for n in [0usize, 1, 2, 3, 17, 64, 1000] {
            // Few distinct keys, so equal keys are common and stability shows; the second
            // field is the original position, which equal keys must keep in order.
            let keys = 1 + (rng.next_u64() % 8) as usize;
            let v: Vec<(usize, usize)> = (0..n).map(|i| ((rng.next_u64() as usize) % keys, i)).collect();
            let mut ours = v.clone();
            sort_by_key(&mut ours, |x| x.0);
            let mut std_sorted = v.clone();
            std_sorted.sort_by_key(|x| x.0);
            assert_eq!(ours, std_sorted, "n = {n}, {keys} keys");
            let mut desc = v.clone();
            sort_by(&mut desc, |a, b| b.0.cmp(&a.0));
            assert!(desc.windows(2).all(|w| w[0].0 > w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
        }
    }

    #[test]
    fn map_of_keeps_the_last_value_of_a_repeated_key_as_collect_does() {
        let mut rng = crate::kernels::rng::Rng::new(0x0003_a90f);
        let pairs: Vec<(String, u64)> = (0..200).map(|_| (format!("k{}", rng.next_u64() % 23), rng.next_u64())).collect();
        let collected: BTreeMap<String, u64> = pairs.iter().cloned().collect();
        assert_eq!(map_of(pairs.iter().cloned()), collected);
        assert!(collected.len() < pairs.len(), "the input repeats keys");
    }

    #[test]
    fn devices_are_written_in_place_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), b"discarded").unwrap();
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device(), "/dev/null must stay a device");
        // A regular file is still replaced whole.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.json");
        std::fs::write(&f, "old and longer").unwrap();
        write_atomic(&f, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "new");
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn threads_lists() {
        assert_eq!(parse_threads("1", 4).unwrap(), vec![1]);
        assert_eq!(parse_threads("2,1,2", 4).unwrap(), vec![1, 2]);
        assert_eq!(parse_threads("all", 4).unwrap(), vec![4]);
        assert_eq!(parse_threads("1-3", 4).unwrap(), vec![1, 2, 3]);
        assert!(parse_threads("5", 4).is_err());
        assert!(parse_threads("0", 4).is_err());
        assert!(parse_threads("x", 4).is_err());
        assert!(parse_threads("", 4).is_err());
        assert!(parse_threads("3-1", 4).is_err());
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("4KiB").unwrap(), 4096);
        assert_eq!(parse_bytes("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_bytes("1.5k").unwrap(), 1536);
        assert_eq!(parse_bytes("2kB").unwrap(), 2000);
        for bad in ["", "abc", "4XB", "0", "-5", "1e30"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn atomic_output() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        let (f, ext) = OutputFile::check(&p, &["json", "csv"]).unwrap();
        assert_eq!(ext, "json");
        f.write(b"{}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        assert!(OutputFile::check(&dir.path().join("missing/a.json"), &["json"]).is_err());
        assert!(OutputFile::check(&dir.path().join("a.txt"), &["json"]).is_err());
        // no temp files left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
