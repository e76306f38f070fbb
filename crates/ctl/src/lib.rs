//! `toolplanectl`: drive a Toolplane control plane from the shell. Tables by default,
//! `--json` for scripts. Exit codes: 0 success, 1 a failed request or drift found, 2 usage.

mod args;
mod commands;
mod connect;
pub mod executor_key;
pub mod handover;
pub mod output;
pub mod profiles;
pub mod progress;
pub mod upstreams;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use args::*;
pub use tp_client::Admin;

/// The Toolplane admin CLI.
#[derive(Debug, Parser)]
#[command(name = "toolplanectl", version, about, propagate_version = true)]
pub struct Cli {
    /// A connection profile of the profiles file (`$TOOLPLANE_CONFIG`, else
    /// `~/.config/toolplane/config.toml`): address, CA, client certificate and admin token of
    /// one control plane. Flags and environment variables win over it.
    #[arg(long, global = true, env = "TOOLPLANE_PROFILE")]
    pub profile: Option<String>,
    /// Control-plane address, `host:port` or a URL (default: `grpc_addr` in
    /// `.toolplane/credentials.json`, which `up` writes, else 127.0.0.1:50051).
    #[arg(long, global = true, env = "TOOLPLANE_ADDR")]
    pub addr: Option<String>,
    /// Admin token (default: $TOOLPLANE_ADMIN_TOKEN, else the file given by --token-file).
    #[arg(
        long,
        global = true,
        env = "TOOLPLANE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// File holding the admin token (default: `admin_token_file` in
    /// `.toolplane/credentials.json`, else `.toolplane/admin-token`).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The tool catalogue.
    #[command(subcommand)]
    Tools(ToolsCmd),
    /// Architecture decision records.
    #[command(subcommand)]
    Adrs(AdrsCmd),
    /// The tool ceiling.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// Tenants: connected APIs, disclosure, rate limits.
    #[command(subcommand)]
    Tenants(TenantsCmd),
    /// API keys.
    #[command(subcommand)]
    Keys(KeysCmd),
    /// Backend executors.
    #[command(subcommand)]
    Executors(ExecutorsCmd),
    /// Providers (external API connections).
    #[command(subcommand)]
    Providers(ProvidersCmd),
    /// Tenants' connections to providers: their own credentials, by OAuth or API credential.
    #[command(subcommand)]
    Connections(ConnectionsCmd),
    /// Roles keys act with (tools and their actions name the roles that may call them).
    #[command(subcommand)]
    Roles(RolesCmd),
    /// The registry a (tenant, role) resolves to.
    Registry(RegistryArgs),
    /// Tool usage counts reported by edges.
    Usage(UsageArgs),
    /// The audit trail: one record per tool call (never argument values), oldest first;
    /// `--json` prints JSON lines, a page at a time, for export.
    Audit(AuditArgs),
    /// Admin tokens: scoped (read-only, tenant-admin for named tenants, full), shown once,
    /// revocable.
    #[command(subcommand)]
    AdminTokens(AdminTokensCmd),
    /// The admin identity your token stands for.
    Whoami,
    /// Committed writes with their authors, oldest first (`--json`: JSON lines).
    Changes(ChangesArgs),
    /// The catalogue as a document.
    #[command(subcommand)]
    Docs(DocsCmd),
    /// Run the whole stack in this process (control plane, demo executor, wiki service, one
    /// MCP edge) on embedded defaults, seeded with the demo world; prints how to connect.
    /// (Run by the `toolplane` launcher, which must sit beside toolplanectl or on PATH.)
    Up(handover::Handover),
    /// Write the whole state of a store (catalogue, ceiling, ADRs, tenants, key hashes,
    /// executors) as one JSON document; reads the store directly.
    /// (Run by the `toolplane` launcher.)
    Export(handover::Handover),
    /// Load an `export` document into a new, empty store (e.g. SQLite → PostgreSQL).
    /// (Run by the `toolplane` launcher.)
    Import(handover::Handover),
    /// Print the key the fleet's edges sign executor calls with (derived from the edge token),
    /// for the executors' `--auth-key-file`; a new random one with `--generate`; or the
    /// signature of a call made by hand with `--sign METHOD JSON`.
    ExecutorKey(executor_key::ExecutorKeyArgs),
}

/// The fields of a tool definition, for `tools register --help` and `tools update --help`.
const TOOL_FIELDS: &str = "\
Register tools from JSON files: each file holds one tool definition or an array of them
(the shape of `tools get NAME --json`'s \"def\"). Unknown fields are refused.

Required:
  name            1-128 characters of [A-Za-z0-9_.-], unique in the catalogue
  description     what the tool does, as models read it
  category        a slug, for progressive disclosure (capabilities)
  input_schema    JSON Schema of the arguments (an object schema)
  executor        the executor that runs it (`toolplanectl executors list`)
Optional:
  title           a human title
  provider        the provider a tenant must connect to see it (none = every tenant)
  output_schema   JSON Schema of structuredContent
  annotations     MCP hints: {\"read_only\", \"destructive\", \"idempotent\", \"open_world\"}
                  (booleans; idempotent tools may be retried on connect errors)
  roles           roles that may see it (empty = all)
  examples        example prompts or calls
  client_capabilities  sampling, elicitation or roots the tool needs from the client
  bucket          curated or platform (default: platform without a provider)
  admission       {\"adr\": \"ADR-...\"} or {\"owner\": ..., \"scope\": ...}: who admitted it
                  under the ceiling
  polymorphism    {\"discriminator\": \"action\", \"actions\": [{\"name\", \"description\",
                  \"schema\", \"roles\"}]}: a polymorphic tool's actions and who may use each

Every registration goes through the ceiling: a full ceiling refuses it (FailedPrecondition).";

/// Runs a command and returns the process exit code.
pub async fn run(cli: Cli) -> i32 {
    match commands::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", describe(&error));
            1
        }
    }
}

/// An error as the CLI prints it: a gRPC status with its field violations spelled out, any
/// control character escaped.
pub fn describe(error: &anyhow::Error) -> String {
    output::printable(&commands::describe_error(error)).into_owned()
}
