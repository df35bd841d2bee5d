//! Recorded CPUID dumps in AIDA64's text format (as collected by InstLatx64), so the same
//! identification, topology and cache code runs on CPUs we do not have.
//!
//! Each logical CPU is a block headed `------[ CPUID Registers / Logical CPU #n ]------`
//! (older dumps: `------[ Logical CPU #n ]------`) holding an
//! `allcpu: Package p / Core c / Thread t: ...` line and lines
//! `CPUID <leaf>: EAX-EBX-ECX-EDX [SL nn] [notes]`. Subleaves are labelled `[SL nn]`; where
//! they are not (old dumps), the k-th line of a leaf in a block is subleaf k. Other blocks
//! (MSRs, summaries) are skipped.

use std::collections::BTreeMap;

use super::cpuid::CpuidSource;
use crate::error::{Error, Result};

/// One logical CPU of a dump.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DumpCpu {
    /// The `#n` of its block.
    pub index: u32,
    /// From the `allcpu:` line, when present.
    pub package: Option<u32>,
    pub core: Option<u32>,
    pub thread: Option<u32>,
    /// `(leaf, subleaf)` → `[eax, ebx, ecx, edx]`.
    pub leaves: BTreeMap<(u32, u32), [u32; 4]>,
}

impl CpuidSource for DumpCpu {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> [u32; 4] {
        self.leaves.get(&(leaf, subleaf)).copied().unwrap_or([0; 4])
    }
}

impl DumpCpu {
    /// Replace the display model in leaf 1 (and 0x8000_0001 on AMD), as a hypervisor might.
    pub fn mask_model(&mut self, display_model: u32) {
        for leaf in [1, 0x8000_0001] {
            if let Some(r) = self.leaves.get_mut(&(leaf, 0)) {
                if leaf == 0x8000_0001 && r[0] == 0 {
                    continue;
                }
                r[0] = (r[0] & !0x000F_00F0) | ((display_model & 0xF) << 4) | ((display_model >> 4 & 0xF) << 16);
            }
        }
    }
}

/// A parsed dump: its logical CPUs in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuidDump {
    /// The logical CPUs, in the dump's order.
    pub cpus: Vec<DumpCpu>,
}

/// Parse an AIDA64 CPUID dump. `origin` names it in errors (`file:line: what`).
pub fn parse(text: &str, origin: &str) -> Result<CpuidDump> {
    let mut cpus: Vec<DumpCpu> = Vec::new();
    let mut current: Option<DumpCpu> = None;
    // Occurrences of each leaf in the current block (for unlabelled subleaves).
    let mut seen: BTreeMap<u32, u32> = BTreeMap::new();
    let bad = |line: usize, what: String| {
        Error::input(
            format!("{origin}:{line}: {what}"),
            "expected an AIDA64 CPUID dump (`CPUID 00000001: EAX-EBX-ECX-EDX` lines in `Logical CPU #n` blocks)",
        )
    };
    for (i, raw_line) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw_line.trim();
        if line.starts_with("------[") {
            if let Some(c) = current.take() {
                cpus.push(c);
            }
            seen.clear();
            if !line.contains("MSR")
                && let Some(pos) = line.find("Logical CPU #")
            {
                let digits: String = line[pos + 13..].chars().take_while(|c| c.is_ascii_digit()).collect();
                let index = digits
                    .parse::<u32>()
                    .map_err(|_| bad(lineno, "block header without a CPU number".into()))?;
                current = Some(DumpCpu {
                    index,
                    ..Default::default()
                });
            }
            continue;
        }
        let Some(cpu) = current.as_mut() else { continue };
        if let Some(rest) = line.strip_prefix("allcpu:") {
            cpu.package = field_after(rest, "Package");
            cpu.core = field_after(rest, "Core");
            cpu.thread = field_after(rest, "Thread");
            continue;
        }
        let Some(rest) = line.strip_prefix("CPUID ") else { continue };
        // `CPUID Manufacturer: ...` summary lines have no hex leaf: skip them.
        let Some((leaf_s, regs_s)) = rest.split_once(':') else { continue };
        let Ok(leaf) = u32::from_str_radix(leaf_s.trim(), 16) else {
            continue;
        };
        let mut parts = regs_s.split_whitespace();
        let regs_tok = parts
            .next()
            .ok_or_else(|| bad(lineno, format!("leaf {leaf:08X} has no registers")))?;
        let regs: Vec<&str> = regs_tok.split('-').collect();
        if regs.len() != 4 {
            return Err(bad(
                lineno,
                format!("leaf {leaf:08X}: expected EAX-EBX-ECX-EDX, found '{regs_tok}'"),
            ));
        }
        let mut r = [0u32; 4];
        for (slot, s) in r.iter_mut().zip(&regs) {
            *slot = u32::from_str_radix(s, 16).map_err(|_| bad(lineno, format!("leaf {leaf:08X}: '{s}' is not a hex register")))?;
        }
        let tail = parts.collect::<Vec<_>>().join(" ");
        let sub = match tail.find("[SL ") {
            Some(p) => {
                let hex: String = tail[p + 4..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
                u32::from_str_radix(&hex, 16).map_err(|_| bad(lineno, "malformed [SL nn] subleaf label".into()))?
            }
            None => *seen.get(&leaf).unwrap_or(&0),
        };
        *seen.entry(leaf).or_insert(0) += 1;
        cpu.leaves.insert((leaf, sub), r);
    }
    if let Some(c) = current.take() {
        cpus.push(c);
    }
    cpus.retain(|c| !c.leaves.is_empty());
    if cpus.is_empty() {
        return Err(bad(text.lines().count().max(1), "no logical CPU block with CPUID lines".into()));
    }
    Ok(CpuidDump { cpus })
}

/// `Package 0 / Core 3 / Thread 1: ...` → the number after `key`.
fn field_after(s: &str, key: &str) -> Option<u32> {
    let p = s.find(key)? + key.len();
    let digits: String = s[p..].trim_start().chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

impl CpuidDump {
    /// Read and parse the dump at `path`.
    pub fn load(path: &std::path::Path) -> Result<CpuidDump> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        parse(&String::from_utf8_lossy(&bytes), &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CPUS: &str = "\
------[ Versions ]------
CPUID Manufacturer: GenuineIntel

------[ CPUID Registers / Logical CPU #0 ]------

allcpu: Package 0 / Core 0 / Thread 0: Valid, Intel Core

CPUID 00000000: 00000024-756E6547-6C65746E-49656E69 [GenuineIntel]
CPUID 00000004: FC004121-02C0003F-0000003F-00000000 [SL 00] [L1D: 48 KB]
CPUID 00000004: FC1FC163-03C0003F-00023FFF-00000004 [SL 03] [L3U: 144 MB]

------[ MSR Registers / Logical CPU #0 ]------
CPUID 00000001: 11111111-11111111-11111111-11111111

------[ Logical CPU #1 ]------
allcpu: Package 1 / Core 7 / Thread 1: Valid
CPUID 0000000B: 00000001-00000002-00000100-00000000
CPUID 0000000B: 00000005-0000000C-00000201-00000000
";

    #[test]
    fn parses_labelled_and_unlabelled_subleaves() {
        let d = parse(TWO_CPUS, "t").unwrap();
        assert_eq!(d.cpus.len(), 2);
        let c0 = &d.cpus[0];
        assert_eq!((c0.package, c0.core, c0.thread), (Some(0), Some(0), Some(0)));
        assert_eq!(c0.cpuid(4, 3), [0xFC1FC163, 0x03C0003F, 0x00023FFF, 4]);
        assert_eq!(c0.cpuid(4, 1), [0; 4], "no subleaf 1 in the dump");
        assert_eq!(c0.cpuid(1, 0), [0; 4], "MSR blocks are not CPUID data");
        let c1 = &d.cpus[1];
        assert_eq!((c1.index, c1.package, c1.core), (1, Some(1), Some(7)));
        assert_eq!(c1.cpuid(0xB, 1)[1], 0xC);
        assert_eq!(c1.cpuid(0xB, 0)[1], 2);
    }

    #[test]
    fn malformed_register_names_the_line() {
        let t = "------[ Logical CPU #0 ]------\nCPUID 00000001: 000306E4-XYZ-0-0\n";
        let e = parse(t, "d.txt").unwrap_err().to_string();
        assert!(e.starts_with("d.txt:2: "), "{e}");
        let e = parse("hello\n", "d.txt").unwrap_err().to_string();
        assert!(e.contains("no logical CPU block"), "{e}");
    }

    #[test]
    fn model_mask_changes_display_model_only() {
        let t = "------[ Logical CPU #0 ]------\nCPUID 00000001: 000A06D1-00800800-7FFEFBFF-BFEBFBFF\n";
        let mut d = parse(t, "t").unwrap();
        d.cpus[0].mask_model(0xA7);
        assert_eq!(d.cpus[0].cpuid(1, 0)[0], 0x000A0671);
    }

    /// Random register values written in the AIDA64 layout parse back exactly (fresh seed each
    /// run, printed so a failure can be replayed with ROOFLINE_SEED).
    #[test]
    fn random_dumps_round_trip() {
        let seed: u64 = std::env::var("ROOFLINE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
        eprintln!("ROOFLINE_SEED={seed}");
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..50 {
            let mut text = String::from("------[ Versions ]------\n\n");
            let mut want: Vec<BTreeMap<(u32, u32), [u32; 4]>> = Vec::new();
            for cpu in 0..(next() % 4 + 1) {
                text += &format!(
                    "------[ CPUID Registers / Logical CPU #{cpu} ]------\n\nallcpu: Package 0 / Core {cpu} / Thread 0: Valid\n\n"
                );
                let mut m = BTreeMap::new();
                for _ in 0..(next() % 20 + 1) {
                    let leaf = if next() % 2 == 0 {
                        (next() % 0x30) as u32
                    } else {
                        0x8000_0000 | (next() % 0x28) as u32
                    };
                    let sub = (next() % 8) as u32;
                    let r = [next() as u32, next() as u32, next() as u32, next() as u32];
                    text += &format!(
                        "CPUID {leaf:08X}: {:08X}-{:08X}-{:08X}-{:08X} [SL {sub:02X}] [note]\n",
                        r[0], r[1], r[2], r[3]
                    );
                    m.insert((leaf, sub), r);
                }
                text += "\nL1    Data Cache:    48 KB, 12-way Associative, 64-byte Line\n\n";
                want.push(m);
            }
            let d = parse(&text, "random").unwrap();
            let got: Vec<_> = d.cpus.iter().map(|c| c.leaves.clone()).collect();
            assert_eq!(got, want, "seed {seed}");
        }
    }
}
