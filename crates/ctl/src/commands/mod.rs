//! Command handlers.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tonic_types::StatusExt;
use tp_proto::convert::{try_adr, try_tenant, try_tool_def};
use tp_proto::pb;
use tp_registry as domain;

use crate::output::{json as pretty, or_dash, table};
use crate::{
    Admin, AdminTokensCmd, AdrArgs, AdrsCmd, Cli, Command, ConnectionsCmd, DocsCmd, ExecutorsCmd,
    KeysCmd, PolicyCmd, ProvidersCmd, RolesCmd, TenantArgs, TenantsCmd, ToolsCmd, TrustArgs,
};

/// `println!` that ignores a closed stdout (`toolplanectl ... | head` must not panic).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(
            std::io::stdout().lock(),
            "{}",
            $crate::output::printable(&text)
        );
    }};
}

mod admins;
mod adrs;
pub(crate) mod audit;
mod connections;
mod docs;
mod drift;
mod executors;
mod keys;
mod policy;
mod providers;
mod registry;
mod roles;
mod tenants;
mod tools;
mod usage;

use self::admins::*;
use self::adrs::*;
use self::audit::*;
use self::docs::*;
use self::drift::*;
use self::executors::*;
use self::keys::*;
use self::policy::*;
use self::providers::*;
use self::registry::*;
use self::roles::*;
use self::tenants::*;
use self::tools::*;
use self::usage::*;

/// Describes an error for people: gRPC code, message and field violations.
pub(crate) fn describe_error(error: &anyhow::Error) -> String {
    let Some(status) = error.downcast_ref::<tonic::Status>() else {
        return format!("{error:#}");
    };
    // The field violations say what the message says, field by field: shown once, as a list
    // when there are several.
    let details = status.get_error_details();
    let violations = details
        .bad_request()
        .map(|b| b.field_violations.clone())
        .unwrap_or_default();
    let mut text = match violations.as_slice() {
        [] => format!("{:?}: {}", status.code(), status.message()),
        [one] => format!(
            "{:?}: invalid {}: {}",
            status.code(),
            one.field,
            one.description
        ),
        many => {
            let mut text = format!("{:?}: {} problems", status.code(), many.len());
            for violation in many {
                text.push_str(&format!(
                    "\n  - {}: {}",
                    violation.field, violation.description
                ));
            }
            text
        }
    };
    // A context added on the way up (which of several requests failed) comes first.
    if error.chain().count() > 1 {
        text = format!("{error}: {text}");
    }
    text
}

fn read_input(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Tool definitions from files that each hold one definition or an array of them.
fn read_definitions(files: &[std::path::PathBuf]) -> anyhow::Result<Vec<domain::ToolDef>> {
    let mut defs = Vec::new();
    for file in files {
        let text = read_input(file)?;
        let what = format!("the tool definitions in {}", file.display());
        if text.trim_start().starts_with('[') {
            let list: Vec<domain::ToolDef> =
                tp_registry::strict::from_json_str(&text, &what).map_err(anyhow::Error::msg)?;
            defs.extend(list);
        } else {
            defs.push(
                tp_registry::strict::from_json_str(&text, &what).map_err(anyhow::Error::msg)?,
            );
        }
    }
    Ok(defs)
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Runs the command; returns the exit code.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<i32> {
    let cli = match cli.command {
        Command::Up(args) => return crate::handover::run("up", args),
        Command::Export(args) => return crate::handover::run("export", args),
        Command::Import(args) => return crate::handover::run("import", args),
        Command::ExecutorKey(args) => return crate::executor_key::run(&args),
        command => Cli { command, ..cli },
    };
    let profile = crate::profiles::select(cli.profile.as_deref())?;
    if let Some(files) = profile
        .as_ref()
        .and_then(|(_, p)| crate::profiles::tls_files(p))
    {
        let name = profile.as_ref().map_or("", |(name, _)| name.as_str());
        tp_client::configure_tls(files, &format!("profile {name}"))?;
    }
    let target = crate::connect::target(&cli, profile.as_ref());
    let token = crate::connect::token(&cli, profile.as_ref())?;
    let admin = Admin::connect(&target.url, &token).await.map_err(|error| {
        let chain = format!("{error:#}");
        match crate::connect::tls_problem(&target, &chain) {
            Some(problem) if target.url.starts_with("https://") => anyhow::anyhow!(problem),
            _ => crate::connect::unreachable(&target, &error.root_cause()),
        }
    })?;
    let json_out = cli.json;
    let result = match cli.command {
        Command::Tools(cmd) => tools(admin, cmd, json_out).await,
        Command::Adrs(cmd) => adrs(admin, cmd, json_out).await,
        Command::Policy(cmd) => policy(admin, cmd, json_out).await,
        Command::Tenants(cmd) => tenants(admin, cmd, json_out).await,
        Command::Keys(cmd) => keys(admin, cmd, json_out).await,
        Command::Executors(cmd) => executors(admin, cmd, json_out).await,
        Command::Providers(cmd) => providers(admin, cmd, json_out).await,
        Command::Connections(cmd) => connections::run(admin, cmd, json_out).await,
        Command::Roles(cmd) => roles(admin, cmd, json_out).await,
        Command::Registry(args) => registry(admin, args, json_out).await,
        Command::Usage(args) => usage(admin, args, json_out).await,
        Command::Audit(args) => audit(admin, args, json_out).await,
        Command::AdminTokens(cmd) => admin_tokens(admin, cmd, json_out).await,
        Command::Whoami => whoami(admin, json_out).await,
        Command::Changes(args) => changes(admin, args, json_out).await,
        Command::Docs(cmd) => docs(admin, cmd, json_out).await,
        Command::Up(_) | Command::Export(_) | Command::Import(_) | Command::ExecutorKey(_) => {
            unreachable!("handled above")
        }
    };
    match result {
        Ok(code) => Ok(code),
        Err(error) => Err(crate::connect::explain(&target, error).await),
    }
}
