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
    Admin, AdrArgs, AdrsCmd, Cli, Command, DocsCmd, ExecutorsCmd, KeysCmd, PolicyCmd, ProvidersCmd,
    RolesCmd, TenantArgs, TenantsCmd, ToolsCmd,
};

/// `println!` that ignores a closed stdout (`toolplanectl ... | head` must not panic).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Describes an error for people: gRPC code, message and field violations.
pub(crate) fn describe_error(error: &anyhow::Error) -> String {
    let Some(status) = error.downcast_ref::<tonic::Status>() else {
        return format!("{error:#}");
    };
    let mut text = format!("{:?}: {}", status.code(), status.message());
    // A context added on the way up (which of several requests failed) comes first.
    if error.chain().count() > 1 {
        text = format!("{error}: {text}");
    }
    let details = status.get_error_details();
    if let Some(bad_request) = details.bad_request() {
        for violation in &bad_request.field_violations {
            text.push_str(&format!(
                "\n  - {}: {}",
                violation.field, violation.description
            ));
        }
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
        Command::Up(args) => return crate::up::up(args).await,
        Command::Export(args) => return crate::transfer::export(args).await,
        Command::Import(args) => return crate::transfer::import(args).await,
        Command::ExecutorKey(args) => return crate::executor_key::run(&args),
        command => Cli { command, ..cli },
    };
    let target = crate::connect::target(&cli);
    let token = crate::connect::token(&cli)?;
    let admin = Admin::connect(&target.url, &token)
        .await
        .map_err(|error| crate::connect::unreachable(&target, &error.root_cause()))?;
    let json_out = cli.json;
    let result = match cli.command {
        Command::Tools(cmd) => tools(admin, cmd, json_out).await,
        Command::Adrs(cmd) => adrs(admin, cmd, json_out).await,
        Command::Policy(cmd) => policy(admin, cmd, json_out).await,
        Command::Tenants(cmd) => tenants(admin, cmd, json_out).await,
        Command::Keys(cmd) => keys(admin, cmd, json_out).await,
        Command::Executors(cmd) => executors(admin, cmd, json_out).await,
        Command::Providers(cmd) => providers(admin, cmd, json_out).await,
        Command::Roles(cmd) => roles(admin, cmd, json_out).await,
        Command::Registry(args) => registry(admin, args, json_out).await,
        Command::Usage(args) => usage(admin, args, json_out).await,
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

// --- tools ----------------------------------------------------------------------------

fn tool_json(tool: &pb::Tool) -> Value {
    let def = try_tool_def(tool.spec.clone()).ok();
    json!({
        "def": def,
        "status": pb::ToolStatus::try_from(tool.status).map(|s| s.as_str_name()).unwrap_or("?"),
        "sunset_date": tool.sunset_date,
        "bucket": pb::Bucket::try_from(tool.effective_bucket).map(|b| b.as_str_name()).unwrap_or("?"),
        "revision": tool.revision,
    })
}

fn status_name(status: i32) -> String {
    match pb::ToolStatus::try_from(status) {
        Ok(pb::ToolStatus::Active) => "active".into(),
        Ok(pb::ToolStatus::Deprecated) => "deprecated".into(),
        Ok(pb::ToolStatus::Retired) => "retired".into(),
        Ok(pb::ToolStatus::Unspecified) | Err(_) => "?".into(),
    }
}

fn parse_status(value: &str) -> anyhow::Result<pb::ToolStatus> {
    Ok(match value {
        "active" => pb::ToolStatus::Active,
        "deprecated" => pb::ToolStatus::Deprecated,
        "retired" => pb::ToolStatus::Retired,
        other => bail!("unknown status {other:?} (active, deprecated, retired)"),
    })
}

fn print_tool(tool: &pb::Tool, json_out: bool) {
    if json_out {
        out!("{}", pretty(&tool_json(tool)));
        return;
    }
    let spec = tool.spec.clone().unwrap_or_default();
    let admission = spec.admission.clone().unwrap_or_default();
    out!("name:        {}", spec.name);
    out!("title:       {}", or_dash(&spec.title));
    out!(
        "status:      {}{}",
        status_name(tool.status),
        if tool.sunset_date.is_empty() {
            String::new()
        } else {
            format!(" (sunset {})", tool.sunset_date)
        }
    );
    out!("category:    {}", spec.category);
    out!("provider:    {}", or_dash(&spec.provider));
    out!("executor:    {}", spec.executor);
    out!(
        "roles:       {}",
        if spec.roles.is_empty() {
            "all".to_owned()
        } else {
            spec.roles.join(", ")
        }
    );
    out!(
        "admitted by: {}",
        if admission.adr.is_empty() {
            format!("{} ({})", admission.owner, admission.scope)
        } else {
            admission.adr
        }
    );
    if let Some(poly) = &spec.polymorphism {
        let actions: Vec<String> = poly
            .actions
            .iter()
            .map(|a| {
                if a.roles.is_empty() {
                    a.name.clone()
                } else {
                    format!("{} [{}]", a.name, a.roles.join(","))
                }
            })
            .collect();
        out!(
            "actions:     {} = {}",
            poly.discriminator,
            actions.join(" | ")
        );
    }
    out!("revision:    {}", tool.revision);
    out!("description: {}", spec.description);
}

async fn tools(mut admin: Admin, cmd: ToolsCmd, json_out: bool) -> anyhow::Result<i32> {
    match cmd {
        ToolsCmd::List {
            category,
            provider,
            status,
        } => {
            let status = status
                .as_deref()
                .map(parse_status)
                .transpose()?
                .unwrap_or(pb::ToolStatus::Unspecified);
            let mut tools = Vec::new();
            let mut page_token = String::new();
            loop {
                let page = admin
                    .catalog
                    .list_tools(pb::ListToolsRequest {
                        page_size: 500,
                        page_token: page_token.clone(),
                        category: category.clone(),
                        provider: provider.clone(),
                        status: status as i32,
                    })
                    .await?
                    .into_inner();
                tools.extend(page.tools);
                if page.next_page_token.is_empty() {
                    break;
                }
                page_token = page.next_page_token;
            }
            if json_out {
                out!(
                    "{}",
                    pretty(&Value::Array(tools.iter().map(tool_json).collect()))
                );
            } else {
                let rows: Vec<Vec<String>> = tools
                    .iter()
                    .map(|tool| {
                        let spec = tool.spec.clone().unwrap_or_default();
                        let admission = spec.admission.clone().unwrap_or_default();
                        vec![
                            spec.name,
                            spec.category,
                            or_dash(&spec.provider),
                            status_name(tool.status),
                            or_dash(&admission.adr),
                            or_dash(&admission.owner),
                        ]
                    })
                    .collect();
                out!(
                    "{}",
                    table(
                        &["NAME", "CATEGORY", "PROVIDER", "STATUS", "ADR", "OWNER"],
                        &rows
                    )
                );
            }
        }
        ToolsCmd::Get { name } => {
            let tool = admin
                .catalog
                .get_tool(pb::GetToolRequest { name })
                .await?
                .into_inner();
            print_tool(&tool, json_out);
        }
        ToolsCmd::Register { files } => {
            let defs = read_definitions(&files)?;
            if let [def] = defs.as_slice() {
                let tool = admin
                    .catalog
                    .register_tool(pb::RegisterToolRequest {
                        tool: Some(def.into()),
                    })
                    .await?
                    .into_inner();
                print_tool(&tool, json_out);
                return Ok(0);
            }
            let mut progress = crate::progress::Progress::new("registering tools", defs.len());
            let mut registered = Vec::new();
            for def in &defs {
                match admin
                    .catalog
                    .register_tool(pb::RegisterToolRequest {
                        tool: Some(def.into()),
                    })
                    .await
                {
                    Ok(tool) => {
                        registered.push(tool.into_inner());
                        progress.step(&def.name);
                    }
                    Err(status) => {
                        return Err(anyhow::Error::new(status).context(format!(
                            "{} refused after {} of {} were registered",
                            def.name,
                            registered.len(),
                            defs.len()
                        )));
                    }
                }
            }
            progress.finish(&format!("registered {} tools", registered.len()));
            if json_out {
                out!(
                    "{}",
                    pretty(&Value::Array(registered.iter().map(tool_json).collect()))
                );
            } else {
                for def in &defs {
                    out!("registered {}", def.name);
                }
            }
        }
        ToolsCmd::Update { file } => {
            let def: domain::ToolDef =
                tp_registry::strict::from_json_str(&read_input(&file)?, "the tool definition")
                    .map_err(anyhow::Error::msg)?;
            let tool = admin
                .catalog
                .update_tool(pb::UpdateToolRequest {
                    tool: Some((&def).into()),
                })
                .await?
                .into_inner();
            print_tool(&tool, json_out);
        }
        ToolsCmd::Deprecate { name, sunset } => {
            let tool = admin
                .catalog
                .deprecate_tool(pb::DeprecateToolRequest {
                    name,
                    sunset_date: sunset,
                })
                .await?
                .into_inner();
            print_tool(&tool, json_out);
        }
        ToolsCmd::Retire { name } => {
            let tool = admin
                .catalog
                .retire_tool(pb::RetireToolRequest { name })
                .await?
                .into_inner();
            print_tool(&tool, json_out);
        }
        ToolsCmd::Reactivate { name } => {
            let tool = admin
                .catalog
                .reactivate_tool(pb::ReactivateToolRequest { name })
                .await?
                .into_inner();
            print_tool(&tool, json_out);
        }
    }
    Ok(0)
}

// --- ADRs and policy --------------------------------------------------------------------

fn adr_status_name(status: i32) -> &'static str {
    match pb::AdrStatus::try_from(status) {
        Ok(pb::AdrStatus::Proposed) => "proposed",
        Ok(pb::AdrStatus::Accepted) => "accepted",
        Ok(pb::AdrStatus::Superseded) => "superseded",
        Ok(pb::AdrStatus::Rejected) => "rejected",
        Ok(pb::AdrStatus::Unspecified) | Err(_) => "?",
    }
}

fn adr_pb(args: AdrArgs) -> anyhow::Result<pb::Adr> {
    let status = match args.status.as_str() {
        "proposed" => pb::AdrStatus::Proposed,
        "accepted" => pb::AdrStatus::Accepted,
        "rejected" => pb::AdrStatus::Rejected,
        "superseded" => pb::AdrStatus::Superseded,
        other => bail!("unknown status {other:?} (proposed, accepted, rejected)"),
    };
    Ok(pb::Adr {
        id: args.id,
        title: args.title,
        status: status as i32,
        date: args.date,
        links: args.links,
        supersedes: args.supersedes,
        summary: args.summary,
    })
}

fn print_adrs(adrs: &[pb::Adr], json_out: bool) {
    if json_out {
        let values: Vec<Value> = adrs
            .iter()
            .map(|a| json!(try_adr(Some(a.clone())).ok()))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
        return;
    }
    let rows: Vec<Vec<String>> = adrs
        .iter()
        .map(|a| {
            vec![
                a.id.clone(),
                adr_status_name(a.status).into(),
                a.date.clone(),
                or_dash(&a.supersedes),
                a.title.clone(),
            ]
        })
        .collect();
    out!(
        "{}",
        table(&["ID", "STATUS", "DATE", "SUPERSEDES", "TITLE"], &rows)
    );
}

async fn adrs(mut admin: Admin, cmd: AdrsCmd, json_out: bool) -> anyhow::Result<i32> {
    let adr = match cmd {
        AdrsCmd::List => {
            let adrs = admin
                .policy
                .list_adrs(pb::ListAdrsRequest {})
                .await?
                .into_inner()
                .adrs;
            print_adrs(&adrs, json_out);
            return Ok(0);
        }
        AdrsCmd::Get { id } => admin
            .policy
            .get_adr(pb::GetAdrRequest { id })
            .await?
            .into_inner(),
        AdrsCmd::Create(args) => admin
            .policy
            .create_adr(pb::CreateAdrRequest {
                adr: Some(adr_pb(args)?),
            })
            .await?
            .into_inner(),
        AdrsCmd::Update(args) => admin
            .policy
            .update_adr(pb::UpdateAdrRequest {
                adr: Some(adr_pb(args)?),
            })
            .await?
            .into_inner(),
        AdrsCmd::Accept { id } => set_status(&mut admin, id, pb::AdrStatus::Accepted).await?,
        AdrsCmd::Reject { id } => set_status(&mut admin, id, pb::AdrStatus::Rejected).await?,
        AdrsCmd::Supersede { id } => set_status(&mut admin, id, pb::AdrStatus::Superseded).await?,
    };
    print_adrs(&[adr], json_out);
    Ok(0)
}

async fn set_status(
    admin: &mut Admin,
    id: String,
    status: pb::AdrStatus,
) -> anyhow::Result<pb::Adr> {
    Ok(admin
        .policy
        .set_adr_status(pb::SetAdrStatusRequest {
            id,
            status: status as i32,
        })
        .await?
        .into_inner())
}

async fn policy(mut admin: Admin, cmd: PolicyCmd, json_out: bool) -> anyhow::Result<i32> {
    let status = match cmd {
        PolicyCmd::Show => admin
            .policy
            .get_policy(pb::GetPolicyRequest {})
            .await?
            .into_inner(),
        PolicyCmd::Amend { ceiling, adr } => admin
            .policy
            .amend_ceiling(pb::AmendCeilingRequest { ceiling, adr })
            .await?
            .into_inner(),
    };
    if json_out {
        let history: Vec<Value> = status
            .history
            .iter()
            .map(|h| json!({"ceiling": h.ceiling, "adr": h.adr, "date": h.date, "revision": h.revision}))
            .collect();
        out!(
            "{}",
            pretty(&json!({
                "ceiling": status.ceiling, "adr": status.adr, "count": status.count, "headroom": status.headroom,
                "curated": status.curated, "platform": status.platform, "deprecated": status.deprecated,
                "retired": status.retired, "history": history, "revision": status.revision,
            }))
        );
        return Ok(0);
    }
    out!("ceiling:  {} (set by {})", status.ceiling, status.adr);
    out!(
        "count:    {} ({} curated + {} platform; {} deprecated)",
        status.count,
        status.curated,
        status.platform,
        status.deprecated
    );
    out!("headroom: {}", status.headroom);
    out!("retired:  {} (not counted)", status.retired);
    let rows: Vec<Vec<String>> = status
        .history
        .iter()
        .map(|h| {
            vec![
                h.ceiling.to_string(),
                h.adr.clone(),
                h.date.clone(),
                h.revision.to_string(),
            ]
        })
        .collect();
    out!(
        "\n{}",
        table(&["CEILING", "ADR", "DATE", "REVISION"], &rows)
    );
    Ok(0)
}

// --- tenants and keys -------------------------------------------------------------------

fn apply_tenant_args(tenant: &mut pb::Tenant, args: TenantArgs) -> anyhow::Result<()> {
    if let Some(name) = args.name {
        tenant.display_name = name;
    }
    if let Some(apis) = args.connected_apis {
        tenant.connected_apis = Some(pb::ConnectedApis {
            providers: split_list(&apis),
        });
    }
    if args.all_apis {
        tenant.connected_apis = None;
    }
    if let Some(roles) = args.roles {
        tenant.roles = split_list(&roles);
    }
    let disclosure = tenant.disclosure.get_or_insert_with(Default::default);
    if let Some(mode) = args.disclosure {
        disclosure.mode = match mode.as_str() {
            "full" => pb::DisclosureMode::Full,
            "progressive" => pb::DisclosureMode::Progressive,
            "auto" => pb::DisclosureMode::Auto,
            other => bail!("unknown disclosure mode {other:?} (full, progressive, auto)"),
        } as i32;
    }
    if let Some(threshold) = args.threshold {
        disclosure.threshold = threshold;
    }
    if let Some(pinned) = args.pinned {
        disclosure.pinned = split_list(&pinned);
    }
    if let Some(rate) = args.rate_limit {
        tenant.rate_limit_per_minute = rate;
    }
    if let Some(webhook) = args.lint_webhook {
        tenant.lint_webhook = webhook;
    }
    Ok(())
}

fn print_tenants(tenants: &[pb::Tenant], json_out: bool) {
    if json_out {
        let values: Vec<Value> = tenants
            .iter()
            .map(|t| {
                // try_tenant reads a tenant as input (no revision); show the stored one.
                json!(try_tenant(Some(t.clone())).ok().map(|mut tenant| {
                    tenant.revision = t.revision;
                    tenant
                }))
            })
            .collect();
        out!("{}", pretty(&Value::Array(values)));
        return;
    }
    let rows: Vec<Vec<String>> = tenants
        .iter()
        .map(|t| {
            let apis = match &t.connected_apis {
                None => "(all)".to_owned(),
                Some(c) if c.providers.is_empty() => "(none)".to_owned(),
                Some(c) => c.providers.join(","),
            };
            let disclosure = t.disclosure.clone().unwrap_or_default();
            let mode = pb::DisclosureMode::try_from(disclosure.mode)
                .map(|m| m.as_str_name())
                .unwrap_or("?");
            vec![
                t.id.clone(),
                apis,
                if t.roles.is_empty() {
                    "all".into()
                } else {
                    t.roles.join(",")
                },
                mode.trim_start_matches("DISCLOSURE_MODE_").to_lowercase(),
                t.rate_limit_per_minute.to_string(),
                t.display_name.clone(),
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &[
                "ID",
                "CONNECTED_APIS",
                "ROLES",
                "DISCLOSURE",
                "RATE/MIN",
                "NAME"
            ],
            &rows
        )
    );
}

async fn tenants(mut admin: Admin, cmd: TenantsCmd, json_out: bool) -> anyhow::Result<i32> {
    let tenant = match cmd {
        TenantsCmd::List => {
            let tenants = admin
                .tenants
                .list_tenants(pb::ListTenantsRequest {})
                .await?
                .into_inner()
                .tenants;
            print_tenants(&tenants, json_out);
            return Ok(0);
        }
        TenantsCmd::Get { id } => admin
            .tenants
            .get_tenant(pb::GetTenantRequest { id })
            .await?
            .into_inner(),
        TenantsCmd::Create(args) => {
            let mut tenant = pb::Tenant {
                id: args.id.clone(),
                ..Default::default()
            };
            apply_tenant_args(&mut tenant, args)?;
            admin
                .tenants
                .create_tenant(pb::CreateTenantRequest {
                    tenant: Some(tenant),
                })
                .await?
                .into_inner()
        }
        TenantsCmd::Update(args) => {
            let mut tenant = admin
                .tenants
                .get_tenant(pb::GetTenantRequest {
                    id: args.id.clone(),
                })
                .await?
                .into_inner();
            apply_tenant_args(&mut tenant, args)?;
            admin
                .tenants
                .update_tenant(pb::UpdateTenantRequest {
                    tenant: Some(tenant),
                })
                .await?
                .into_inner()
        }
        TenantsCmd::Delete { id } => {
            let deleted = admin
                .tenants
                .delete_tenant(pb::DeleteTenantRequest { id: id.clone() })
                .await?
                .into_inner();
            if json_out {
                out!(
                    "{}",
                    pretty(
                        &json!({"deleted": id, "keys_deleted": deleted.keys_deleted, "revision": deleted.revision})
                    )
                );
            } else {
                out!(
                    "deleted tenant {id} and {} keys (revision {})",
                    deleted.keys_deleted,
                    deleted.revision
                );
            }
            return Ok(0);
        }
    };
    print_tenants(&[tenant], json_out);
    Ok(0)
}

fn print_keys(keys: &[pb::ApiKeyInfo], json_out: bool) {
    if json_out {
        let values: Vec<Value> = keys
            .iter()
            .map(|k| json!({"id": k.id, "tenant": k.tenant, "role": k.role, "label": k.label, "created_at": k.created_at, "expires_at": k.expires_at, "revoked_at": k.revoked_at}))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
        return;
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let state = if k.revoked_at > 0 { "revoked" } else { "live" };
            vec![
                k.id.clone(),
                k.tenant.clone(),
                k.role.clone(),
                state.into(),
                if k.expires_at == 0 {
                    "never".into()
                } else {
                    crate::output::when(k.expires_at * 1000, crate::output::now_ms())
                },
                or_dash(&k.label),
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &["ID", "TENANT", "ROLE", "STATE", "EXPIRES_AT", "LABEL"],
            &rows
        )
    );
}

async fn keys(mut admin: Admin, cmd: KeysCmd, json_out: bool) -> anyhow::Result<i32> {
    match cmd {
        KeysCmd::Issue {
            tenant,
            role,
            label,
            ttl,
        } => {
            let issued = admin
                .tenants
                .issue_api_key(pb::IssueApiKeyRequest {
                    tenant,
                    role,
                    label,
                    ttl_seconds: ttl,
                })
                .await?
                .into_inner();
            let info = issued.info.unwrap_or_default();
            if json_out {
                out!(
                    "{}",
                    pretty(
                        &json!({"key": issued.key, "id": info.id, "tenant": info.tenant, "role": info.role, "expires_at": info.expires_at})
                    )
                );
            } else {
                out!("{}", issued.key);
                eprintln!(
                    "key {} for tenant {} as {} — shown once; store it now",
                    info.id, info.tenant, info.role
                );
            }
        }
        KeysCmd::List { tenant } => {
            let keys = admin
                .tenants
                .list_api_keys(pb::ListApiKeysRequest { tenant })
                .await?
                .into_inner()
                .keys;
            print_keys(&keys, json_out);
        }
        KeysCmd::Revoke { id } => {
            let key = admin
                .tenants
                .revoke_api_key(pb::RevokeApiKeyRequest { id })
                .await?
                .into_inner();
            print_keys(&[key], json_out);
        }
    }
    Ok(0)
}

// --- executors, providers, roles ---------------------------------------------------------

async fn executors(mut admin: Admin, cmd: ExecutorsCmd, json_out: bool) -> anyhow::Result<i32> {
    let list = match cmd {
        ExecutorsCmd::List => {
            admin
                .executors
                .list_executors(pb::ListExecutorsRequest {})
                .await?
                .into_inner()
                .executors
        }
        ExecutorsCmd::Upsert {
            name,
            endpoint,
            protocol,
            timeout_ms,
            max_concurrency,
            description,
            tool_prefix,
            credential_env,
            credential_header,
        } => {
            let protocol = match protocol.as_str() {
                "grpc" => pb::ExecutorProtocol::Grpc,
                "mcp" => pb::ExecutorProtocol::Mcp,
                other => bail!("unknown protocol {other:?} (grpc, mcp)"),
            };
            let executor = pb::ExecutorInfo {
                name,
                endpoint,
                protocol: protocol as i32,
                timeout_ms,
                max_concurrency,
                description,
                tool_prefix,
                credential_env,
                credential_header,
            };
            vec![
                admin
                    .executors
                    .upsert_executor(pb::UpsertExecutorRequest {
                        executor: Some(executor),
                    })
                    .await?
                    .into_inner(),
            ]
        }
        ExecutorsCmd::Import {
            name,
            provider,
            category,
            only,
            register,
            adr,
            owner,
            scope,
            credential,
        } => {
            if register && adr.is_empty() && (owner.is_empty() || scope.is_empty()) {
                bail!(
                    "--register needs --adr, or --owner and --scope: every tool is admitted by one"
                );
            }
            let options = crate::upstreams::ImportOptions {
                provider,
                category,
                only,
                adr,
                owner,
                scope,
            };
            let defs = crate::upstreams::proposals(&mut admin, &name, credential, &options).await?;
            if !register {
                out!("{}", pretty(&json!(defs)));
                return Ok(0);
            }
            let mut admitted = 0;
            let mut progress =
                crate::progress::Progress::new(&format!("registering {name}'s tools"), defs.len());
            for def in &defs {
                let spec = pb::ToolSpec::from(def);
                match admin
                    .catalog
                    .register_tool(pb::RegisterToolRequest { tool: Some(spec) })
                    .await
                {
                    Ok(_) => {
                        admitted += 1;
                        progress.step(&def.name);
                        out!("registered {}", def.name);
                    }
                    Err(status) => {
                        out!(
                            "{} of {} registered; {} refused:\n{}",
                            admitted,
                            defs.len(),
                            def.name,
                            describe_error(&anyhow::Error::new(status))
                        );
                        return Ok(1);
                    }
                }
            }
            out!("{admitted} tools registered from {name}");
            return Ok(0);
        }
        ExecutorsCmd::Drift { name, credential } => {
            let report = crate::upstreams::drift(&mut admin, &name, credential).await?;
            let drifted = ["added", "removed", "schema_changed"]
                .iter()
                .any(|k| report[*k].as_array().is_some_and(|a| !a.is_empty()));
            if json_out {
                out!("{}", pretty(&report));
            } else {
                out!(
                    "{name} ({}): {} upstream tools, {} in the catalogue",
                    report["protocol_version"].as_str().unwrap_or_default(),
                    report["upstream_tools"],
                    report["catalogued_tools"]
                );
                for (key, label) in [
                    ("added", "new upstream (not in the catalogue)"),
                    ("removed", "gone upstream (still in the catalogue)"),
                    ("schema_changed", "input schema changed"),
                ] {
                    for tool in report[key].as_array().into_iter().flatten() {
                        out!("  {label}: {}", tool.as_str().unwrap_or_default());
                    }
                }
                if !drifted {
                    out!("  no drift");
                }
            }
            return Ok(i32::from(drifted));
        }
        ExecutorsCmd::Delete { name } => {
            let deleted = admin
                .executors
                .delete_executor(pb::DeleteExecutorRequest { name: name.clone() })
                .await?
                .into_inner();
            out!("deleted executor {name} (revision {})", deleted.revision);
            return Ok(0);
        }
    };
    if json_out {
        let values: Vec<Value> = list
            .iter()
            .map(|e| json!(domain::Executor::from(e)))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
    } else {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|e| {
                let executor = domain::Executor::from(e);
                vec![
                    executor.name,
                    executor.protocol.as_str().into(),
                    executor.endpoint,
                    executor.timeout_ms.to_string(),
                    executor.max_concurrency.to_string(),
                ]
            })
            .collect();
        out!(
            "{}",
            table(
                &["NAME", "PROTOCOL", "ENDPOINT", "TIMEOUT_MS", "CONCURRENCY"],
                &rows
            )
        );
    }
    Ok(0)
}

async fn providers(mut admin: Admin, cmd: ProvidersCmd, json_out: bool) -> anyhow::Result<i32> {
    let list = match cmd {
        ProvidersCmd::List => {
            admin
                .catalog
                .list_providers(pb::ListProvidersRequest {})
                .await?
                .into_inner()
                .providers
        }
        ProvidersCmd::Upsert {
            id,
            name,
            description,
        } => {
            let provider = pb::Provider {
                id,
                display_name: name,
                description,
            };
            vec![
                admin
                    .catalog
                    .upsert_provider(pb::UpsertProviderRequest {
                        provider: Some(provider),
                    })
                    .await?
                    .into_inner(),
            ]
        }
        ProvidersCmd::Delete { id } => {
            let deleted = admin
                .catalog
                .delete_provider(pb::DeleteProviderRequest { id: id.clone() })
                .await?
                .into_inner();
            out!("deleted provider {id} (revision {})", deleted.revision);
            return Ok(0);
        }
    };
    if json_out {
        let values: Vec<Value> = list
            .into_iter()
            .map(|p| json!(domain::Provider::from(p)))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
    } else {
        let rows: Vec<Vec<String>> = list
            .into_iter()
            .map(|p| vec![p.id, p.display_name, p.description])
            .collect();
        out!("{}", table(&["ID", "NAME", "DESCRIPTION"], &rows));
    }
    Ok(0)
}

async fn roles(mut admin: Admin, cmd: RolesCmd, json_out: bool) -> anyhow::Result<i32> {
    let list = match cmd {
        RolesCmd::List => {
            admin
                .catalog
                .list_roles(pb::ListRolesRequest {})
                .await?
                .into_inner()
                .roles
        }
        RolesCmd::Upsert { name, description } => {
            vec![
                admin
                    .catalog
                    .upsert_role(pb::UpsertRoleRequest {
                        role: Some(pb::Role { name, description }),
                    })
                    .await?
                    .into_inner(),
            ]
        }
        RolesCmd::Delete { name } => {
            let deleted = admin
                .catalog
                .delete_role(pb::DeleteRoleRequest { name: name.clone() })
                .await?
                .into_inner();
            out!("deleted role {name} (revision {})", deleted.revision);
            return Ok(0);
        }
    };
    if json_out {
        let values: Vec<Value> = list
            .into_iter()
            .map(|r| json!(domain::Role::from(r)))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
    } else {
        let rows: Vec<Vec<String>> = list
            .into_iter()
            .map(|r| vec![r.name, r.description])
            .collect();
        out!("{}", table(&["NAME", "DESCRIPTION"], &rows));
    }
    Ok(0)
}

// --- registry, usage, docs -------------------------------------------------------------

async fn registry(
    mut admin: Admin,
    args: crate::RegistryArgs,
    json_out: bool,
) -> anyhow::Result<i32> {
    let preview = admin
        .tenants
        .preview_registry(pb::PreviewRegistryRequest {
            tenant: args.tenant,
            role: args.role,
        })
        .await?
        .into_inner();
    let tools: Vec<domain::ResolvedTool> = preview
        .tools
        .iter()
        .map(domain::ResolvedTool::from)
        .collect();
    if json_out {
        out!(
            "{}",
            pretty(&json!({"revision": preview.revision, "tools": tools}))
        );
    } else {
        let rows: Vec<Vec<String>> = tools
            .iter()
            .map(|t| {
                let actions = t
                    .actions
                    .as_ref()
                    .map(|a| a.allowed.join("|"))
                    .unwrap_or_default();
                vec![
                    t.name.clone(),
                    t.category.clone(),
                    or_dash(t.provider.as_deref().unwrap_or("")),
                    or_dash(&actions),
                ]
            })
            .collect();
        out!(
            "{}",
            table(&["NAME", "CATEGORY", "PROVIDER", "ACTIONS"], &rows)
        );
        out!("\n{} tools at revision {}", tools.len(), preview.revision);
    }
    Ok(0)
}

async fn usage(mut admin: Admin, args: crate::UsageArgs, json_out: bool) -> anyhow::Result<i32> {
    let usage = admin
        .registry
        .get_usage(pb::GetUsageRequest {
            tenant: args.tenant,
        })
        .await?
        .into_inner()
        .tools;
    if json_out {
        let values: Vec<Value> = usage
            .iter()
            .map(|u| json!({"tool": u.tool, "calls": u.calls, "errors": u.errors, "last_used_ms": u.last_used_ms, "last_used": crate::output::when(u.last_used_ms, crate::output::now_ms())}))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
    } else {
        let now = crate::output::now_ms();
        let rows: Vec<Vec<String>> = usage
            .iter()
            .map(|u| {
                vec![
                    u.tool.clone(),
                    u.calls.to_string(),
                    u.errors.to_string(),
                    crate::output::when(u.last_used_ms, now),
                ]
            })
            .collect();
        out!(
            "{}",
            table(&["TOOL", "CALLS", "ERRORS", "LAST USED"], &rows)
        );
    }
    Ok(0)
}

async fn docs(mut admin: Admin, cmd: DocsCmd, json_out: bool) -> anyhow::Result<i32> {
    match cmd {
        DocsCmd::Render { out } => {
            let markdown = admin
                .policy
                .render_tools_doc(pb::RenderToolsDocRequest {})
                .await?
                .into_inner()
                .markdown;
            match out {
                Some(path) => std::fs::write(&path, markdown)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => {
                    use std::io::Write as _;
                    let _ = write!(std::io::stdout().lock(), "{markdown}");
                }
            }
            Ok(0)
        }
        DocsCmd::Check { files } => {
            let mut drift = 0usize;
            let mut reports = Vec::new();
            for file in files {
                let text = read_input(&file)?;
                let name = file.display().to_string();
                let checked = admin
                    .policy
                    .check_document(pb::CheckDocumentRequest {
                        text,
                        name: name.clone(),
                    })
                    .await?
                    .into_inner();
                drift += checked.findings.len();
                for finding in &checked.findings {
                    if !json_out {
                        out!(
                            "{name}:{}: states {} tools (\"{}\"), the catalogue has {}",
                            finding.line,
                            finding.stated,
                            finding.text,
                            finding.actual
                        );
                    }
                }
                reports.push(json!({
                    "file": name,
                    "actual": checked.actual,
                    "findings": checked.findings.iter().map(|f| json!({"line": f.line, "text": f.text, "stated": f.stated, "actual": f.actual})).collect::<Vec<_>>(),
                }));
            }
            if json_out {
                out!("{}", pretty(&Value::Array(reports)));
            } else if drift == 0 {
                out!("no drift: every stated tool count matches the catalogue");
            }
            Ok(if drift == 0 { 0 } else { 1 })
        }
    }
}
