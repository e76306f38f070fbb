//! `toolplanectl`: the Toolplane admin CLI. See `toolplanectl --help`.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = tp_ctl::Cli::parse();
    let code = tp_ctl::run(cli).await;
    std::process::exit(code);
}
