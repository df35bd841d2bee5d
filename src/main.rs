fn main() {
    std::process::exit(roofline::cli::main());
}
