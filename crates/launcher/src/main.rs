//! `toolplane`: the launcher. See `toolplane --help`.

use clap::Parser;

/// The process's allocator: mimalloc, which answers the many small allocations of a request
/// from per-thread pages where glibc's malloc, once its per-thread cache of a size is full,
/// takes its locked path (docs/performance.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let code = tp_launcher::run(tp_launcher::Cli::parse()).await;
    std::process::exit(code);
}
