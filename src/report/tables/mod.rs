//! The tables commands print besides a report's own summary (`report::table`): one file
//! per command, each a function from the command's typed data to the text it prints.
//! [`Columns`] lays out a table whose header and rows share their column widths.

use std::fmt::Display;

#[cfg(feature = "analysis")]
pub mod ceilings;
pub mod compare;
pub mod energy;
pub mod events;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod kernels;
#[cfg(feature = "analysis")]
pub mod machine;
pub mod measure;
pub mod perf_stat;
pub mod run;
#[cfg(feature = "analysis")]
pub mod sweep;
#[cfg(feature = "trace")]
pub mod validate;
#[cfg(feature = "trace")]
pub mod validate_perf;

/// Which side of its column a cell keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table's column layout: each column's alignment and width, cells joined by `gap`. A
/// table writes its header and its rows with the same layout, so the two cannot drift apart.
/// A cell wider than its column is written whole and pushes the rest of its line right, as
/// `format!` widths do; widths count characters (`µs` is two), not bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    gap: &'static str,
    columns: Vec<(Align, usize)>,
}

impl Columns {
    /// No columns yet; cells will be joined by `gap`.
    pub fn new(gap: &'static str) -> Columns {
        Columns { gap, columns: Vec::new() }
    }

    /// Adds a left-aligned column.
    pub fn left(self, width: usize) -> Columns {
        self.column(Align::Left, width)
    }

    /// Adds a right-aligned column.
    pub fn right(self, width: usize) -> Columns {
        self.column(Align::Right, width)
    }

    /// Adds a column.
    pub fn column(mut self, align: Align, width: usize) -> Columns {
        self.columns.push((align, width));
        self
    }

    /// One line of cells, each padded to its column, without a newline. Every column gets
    /// one cell: a different number is a bug in the table, caught in its tests.
    pub fn line<I>(&self, cells: I) -> String
    where
        I: IntoIterator,
        I::Item: Display,
    {
        let mut out = String::new();
        let mut n = 0;
        for (i, cell) in cells.into_iter().enumerate() {
            let (align, width) = self.columns[i];
            if i > 0 {
                out.push_str(self.gap);
            }
            let text = cell.to_string();
            match align {
                Align::Left => out.push_str(&format!("{text:<width$}")),
                Align::Right => out.push_str(&format!("{text:>width$}")),
            }
            n = i + 1;
        }
        assert_eq!(n, self.columns.len(), "a table line has one cell per column");
        out
    }
}

/// A number with `prec` decimals, or `-` when unknown.
pub fn or_dash(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "-".to_string())
}

/// The character column where the first `needle` after character `from` ends in `line`:
/// where a cell ends, for tests that check a row's cells end under their headers.
#[cfg(test)]
pub(crate) fn end_of(line: &str, needle: &str, from: usize) -> usize {
    let start = line.char_indices().nth(from).map_or(line.len(), |(i, _)| i);
    let at = line[start..].find(needle).unwrap_or_else(|| panic!("{needle:?} not in {line:?}"));
    line[..start + at].chars().count() + needle.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Bytes, Flops, Point, Provenance, Source};

    /// A point of `flops` (three quarters packed, a quarter scalar) with bytes per level from
    /// the trace (DRAM from the model), timed natively, with one note.
    pub(crate) fn point(name: &str, flops: f64, levels: &[(&str, f64)], samples: Vec<f64>) -> Point {
        let mut bytes = Bytes::new();
        let mut from = std::collections::BTreeMap::new();
        for (l, b) in levels {
            bytes.insert(l.to_string(), *b);
            from.insert(l.to_string(), if *l == "dram" { Source::Analytic } else { Source::Trace });
        }
        let by_class = if flops > 0.0 {
            [
                ("packed256_double".to_string(), 0.75 * flops),
                ("scalar_double".to_string(), 0.25 * flops),
            ]
            .into()
        } else {
            Default::default()
        };
        let provenance = Provenance {
            flops: (flops > 0.0).then_some(Source::Trace),
            bytes: from,
            seconds: Some(Source::Native),
            notes: vec!["a note".into()],
            untrusted: Vec::new(),
        };
        let flops = Flops {
            total: flops,
            by_class,
            ..Default::default()
        };
        Point::new(name, provenance, flops, bytes, 1, samples)
    }

    #[test]
    fn columns_pad_like_format_widths() {
        let cols = Columns::new(" ").left(6).right(5).right(4);
        assert_eq!(cols.line(["a", "1", "2.5"]), "a          1  2.5");
        assert_eq!(cols.line(["a", "1", "2.5"]), format!("{:<6} {:>5} {:>4}", "a", "1", "2.5"));
        // A wide cell is kept whole and pushes the rest right by its excess.
        assert_eq!(cols.line(["longer_than_six", "1", "x"]), "longer_than_six     1    x");
        // Mixed cell types, and characters rather than bytes: `µ` is one column.
        let cols = Columns::new("  ").right(7).left(3);
        assert_eq!(cols.line([&"1.5µs" as &dyn Display, &42]), "  1.5µs  42 ");
        assert_eq!(cols.line([&"1.5µs" as &dyn Display, &42]).chars().count(), 7 + 2 + 3);
    }

    #[test]
    #[should_panic(expected = "one cell per column")]
    fn a_missing_cell_is_a_bug() {
        Columns::new(" ").left(3).left(3).line(["only one"]);
    }

    #[test]
    #[should_panic]
    fn an_extra_cell_is_a_bug() {
        Columns::new(" ").left(3).line(["one", "two"]);
    }

    #[test]
    fn end_of_counts_characters() {
        assert_eq!(end_of("ab µs cd", "µs", 0), 5);
        assert_eq!(end_of("x1 x1", "x1", 1), 5);
    }

    #[test]
    fn unknown_numbers_are_dashes() {
        assert_eq!(or_dash(None, 2), "-");
        assert_eq!(or_dash(Some(1.005), 1), "1.0");
        assert_eq!(or_dash(Some(f64::INFINITY), 1), "inf");
    }
}
