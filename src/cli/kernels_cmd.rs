//! `roofline kernels`: the suite, the variants this CPU can run, and the W/Q formulas.

use crate::kernels::{Variant, api, check};
use crate::report::tables::kernels::kernels_table;
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
