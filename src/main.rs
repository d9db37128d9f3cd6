fn main() {
    std::process::exit(warren::cli::main());
}
