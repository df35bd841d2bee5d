fn main() {
    std::process::exit(roofline::cli_main());
}
