//! The `fencesim` command-line program: the catalog from `scenarios`, the commands from
//! `sim::cli`.

fn main() {
    std::process::exit(sim::cli::main(&scenarios::catalog()));
}
