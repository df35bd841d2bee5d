//! `roofline kernels`: the suite as text.

use super::Columns;
use crate::schema::documents::KernelsDocument;

/// One line per kernel: precision, variants (runnable ones starred), size unit, description;
/// under it the formula of the default variant, or of every variant with `all_formulas`.
pub fn kernels_table(doc: &KernelsDocument, all_formulas: bool) -> String {
    let w = doc.kernels.iter().map(|k| k.name.len()).max().unwrap_or(6).max(6);
    let cols = Columns::new("  ").left(w).left(9).left(28).left(26).left(0);
    let mut s = cols.line(["KERNEL", "PRECISION", "VARIANTS (* = runnable)", "SIZE N", "DESCRIPTION"]) + "\n";
    for k in &doc.kernels {
        let vs: Vec<String> = k
            .variants
            .iter()
            .map(|v| format!("{}{}", v.name, if v.runnable { "*" } else { "" }))
            .collect();
        let prec = format!("{:?}", k.precision).to_lowercase();
        s += &(cols.line([&k.name, &prec, &vs.join(" "), &k.size_unit, &k.description]) + "\n");
        for v in &k.variants {
            if all_formulas || Some(&v.name) == k.default_variant.as_ref() {
                s += &format!("{:<w$}    {}: {}\n", "", v.name, v.formula);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Precision;
    use crate::schema::documents::{KernelInfo, VariantInfo};

    fn kernel(name: &str, variants: &[(&str, bool)], default: Option<&str>) -> KernelInfo {
        KernelInfo {
            name: name.into(),
            description: format!("{name} does things"),
            precision: Precision::F16,
            size_unit: "elements".into(),
            default_variant: default.map(String::from),
            variants: variants
                .iter()
                .map(|(v, runnable)| VariantInfo {
                    name: v.to_string(),
                    runnable: *runnable,
                    formula: format!("W = {v}"),
                })
                .collect(),
        }
    }

    #[test]
    fn a_name_wider_than_its_header_widens_the_first_column() {
        let doc = KernelsDocument {
            kernels: vec![
                kernel("a_kernel_with_a_long_name", &[("scalar", true), ("avx512", false)], Some("scalar")),
                kernel("dot", &[("scalar", true)], None),
            ],
        };
        let t = kernels_table(&doc, false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        // Left-aligned columns: every cell starts under its header.
        for l in [lines[1], lines[3]] {
            assert_eq!(lines[0].find("PRECISION"), l.find("f16"), "{t}");
            assert_eq!(lines[0].find("SIZE N"), l.find("elements"), "{t}");
            assert_eq!(lines[0].find("DESCRIPTION"), l.rfind("  ").map(|i| i + 2), "{t}");
        }
        assert!(lines[1].contains("  scalar* avx512  "), "{t}");
        assert!(lines[1].ends_with("  a_kernel_with_a_long_name does things"), "{t}");
        // The default variant's formula under its kernel, indented past the name column.
        assert_eq!(lines[2], format!("{}    scalar: W = scalar", " ".repeat(25)));
        // Without a default variant, no formula line; with all_formulas, every variant's.
        let all = kernels_table(&doc, true);
        assert_eq!(all.lines().count(), 6, "{all}");
        assert!(all.contains("    avx512: W = avx512\n"), "{all}");
    }

    #[test]
    fn short_names_keep_the_header_width() {
        let t = kernels_table(
            &KernelsDocument {
                kernels: vec![kernel("ab", &[], None)],
            },
            true,
        );
        // As the hand-aligned format wrote it.
        let head = format!(
            "{:<6}  {:<9}  {:<28}  {:<26}  DESCRIPTION\n",
            "KERNEL", "PRECISION", "VARIANTS (* = runnable)", "SIZE N"
        );
        let row = format!("{:<6}  {:<9}  {:<28}  {:<26}  {}\n", "ab", "f16", "", "elements", "ab does things");
        assert_eq!(t, head + &row);
    }
}
