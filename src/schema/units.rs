//! Numbers as people read them: three significant digits, SI and binary prefixes, seconds.

/// Engineering-style number: 3 significant digits, SI suffix.
pub fn si(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    let (v, s) = if a >= 1e12 {
        (x / 1e12, "T")
    } else if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    format!("{}{s}", sig3(v))
}

/// `33.6 MFLOP`, `537 MB`: SI prefix then the unit.
pub fn si_unit(x: f64, unit: &str) -> String {
    let s = si(x);
    match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => format!("{} {c}{unit}", &s[..i]),
        _ => format!("{s} {unit}"),
    }
}

/// Three significant digits without exponent for everyday magnitudes.
pub fn sig3(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// Seconds with a unit: `1.23 ms`.
pub fn seconds(t: f64) -> String {
    if t >= 1.0 {
        format!("{} s", sig3(t))
    } else if t >= 1e-3 {
        format!("{} ms", sig3(t * 1e3))
    } else if t >= 1e-6 {
        format!("{} µs", sig3(t * 1e6))
    } else {
        format!("{} ns", sig3(t * 1e9))
    }
}

/// Human-readable binary size.
pub fn fmt_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", units[i])
    } else {
        format!("{v:.1} {}", units[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(si(1.5e9), "1.50G");
        assert_eq!(si(999.0), "999");
        assert_eq!(sig3(0.01234), "0.012");
        assert_eq!(seconds(2.5e-3), "2.50 ms");
        assert_eq!(seconds(12e-9), "12.0 ns");
        assert_eq!(si(f64::NAN), "-");
        assert_eq!(si_unit(5.37e8, "B"), "537 MB");
        assert_eq!(si_unit(12.0, "B"), "12.0 B");
    }
}
