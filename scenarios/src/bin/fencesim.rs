//! The `fencesim` command-line program: the catalog from `scenarios`, the commands from
//! `sim::cli`.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(sim::cli::main(&scenarios::catalog()));
}
