//! `toolplane`: the launcher. See `toolplane --help`.

use clap::Parser;

#[tokio::main]
async fn main() {
    let code = tp_launcher::run(tp_launcher::Cli::parse()).await;
    std::process::exit(code);
}
