//! `cargo roofline`: build a target in release, measure it, write the report.
fn main() {
    std::process::exit(roofline::cargo_roofline_main());
}
