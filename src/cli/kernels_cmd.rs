//! `roofline kernels`: the suite, the variants this CPU can run, and the W/Q formulas.

use crate::kernels::{Variant, api, check};
use crate::schema::documents::{KernelInfo, KernelsDocument, VariantInfo};
use clap::Args as ClapArgs;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Print the list as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Show the formulas of every variant (the table shows the widest runnable one).
    #[arg(long)]
    pub all_formulas: bool,
}

/// The widest variant of `variants` this CPU runs.
pub fn widest_runnable(variants: &[Variant]) -> Option<Variant> {
    variants.iter().copied().filter(|v| check::runnable(*v)).max()
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let infos: Vec<KernelInfo> = api::all()
        .iter()
        .map(|k| KernelInfo {
            name: k.name().into(),
            description: k.description().into(),
            precision: k.precision(),
            size_unit: k.size_unit().into(),
            default_variant: widest_runnable(k.variants()).map(|v| v.name().into()),
            variants: k
                .variants()
                .iter()
                .map(|&v| VariantInfo {
                    name: v.name().into(),
                    runnable: check::runnable(v) && k.unavailable(v).is_none(),
                    formula: k.formula(v),
                })
                .collect(),
        })
        .collect();
    let doc = KernelsDocument { kernels: infos };
    if args.json {
        println!("{}", doc.to_json());
    } else {
        print!("{}", kernels_table(&doc, args.all_formulas));
    }
    Ok(0)
}

/// One line per kernel: precision, variants (runnable ones starred), size unit, description;
/// under it the formula of the default variant, or of every variant with `all_formulas`.
fn kernels_table(doc: &KernelsDocument, all_formulas: bool) -> String {
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
