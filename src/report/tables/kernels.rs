//! `roofline kernels`: the suite as text.

use crate::schema::documents::KernelsDocument;

/// One line per kernel: precision, variants (runnable ones starred), size unit, description;
/// under it the formula of the default variant, or of every variant with `all_formulas`.
pub fn kernels_table(doc: &KernelsDocument, all_formulas: bool) -> String {
    let mut s = String::new();
    let w = doc.kernels.iter().map(|k| k.name.len()).max().unwrap_or(6).max(6);
    s += &format!(
        "{:<w$}  {:<9}  {:<28}  {:<26}  DESCRIPTION\n",
        "KERNEL", "PRECISION", "VARIANTS (* = runnable)", "SIZE N"
    );
    for k in &doc.kernels {
        let vs: Vec<String> = k
            .variants
            .iter()
            .map(|v| format!("{}{}", v.name, if v.runnable { "*" } else { "" }))
            .collect();
        let prec = format!("{:?}", k.precision).to_lowercase();
        s += &format!(
            "{:<w$}  {:<9}  {:<28}  {:<26}  {}\n",
            k.name,
            prec,
            vs.join(" "),
            k.size_unit,
            k.description
        );
        for v in &k.variants {
            if all_formulas || Some(&v.name) == k.default_variant.as_ref() {
                s += &format!("{:<w$}    {}: {}\n", "", v.name, v.formula);
            }
        }
    }
    s
}
