//! `toolplane`: the launcher. `toolplane up` runs the whole stack in one process on embedded
//! defaults; `toolplane export` and `toolplane import` move a store's world offline. It is the
//! only crate that links every service, so the admin CLI (`toolplanectl`, which hands these
//! three commands over to this binary) links none of them.

mod ports;
pub mod transfer;
pub mod up;

use clap::{Parser, Subcommand};

/// Toolplane's launcher: the whole stack in one process, and offline store transfers.
#[derive(Debug, Parser)]
#[command(name = "toolplane", version, about, propagate_version = true)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The launcher's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the whole stack in this process (control plane, demo executor, wiki service, one
    /// MCP edge) on embedded defaults, seeded with the demo world; prints how to connect.
    Up(up::UpArgs),
    /// Write the whole state of a store (catalogue, ceiling, ADRs, tenants, key hashes,
    /// executors) as one JSON document; reads the store directly.
    Export(transfer::ExportArgs),
    /// Load an `export` document into a new, empty store (e.g. SQLite → PostgreSQL).
    Import(transfer::ImportArgs),
}

/// Runs a command and returns the process exit code.
pub async fn run(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Up(args) => up::up(args).await,
        Command::Export(args) => transfer::export(args).await,
        Command::Import(args) => transfer::import(args).await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", tp_ctl::describe(&error));
            1
        }
    }
}
