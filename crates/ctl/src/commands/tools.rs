//! `tools …`: the catalogue.

use super::*;

pub(super) fn tool_json(tool: &pb::Tool) -> Value {
    let def = try_tool_def(tool.spec.clone()).ok();
    json!({
        "def": def,
        "status": pb::ToolStatus::try_from(tool.status).map(|s| s.as_str_name()).unwrap_or("?"),
        "sunset_date": tool.sunset_date,
        "bucket": pb::Bucket::try_from(tool.effective_bucket).map(|b| b.as_str_name()).unwrap_or("?"),
        "revision": tool.revision,
        "pin": tool.pin.as_ref().map(|pin| json!({
            "hash": pin.hash, "by": pin.by, "basis": pin.basis, "revision": pin.revision,
        })),
        "findings": tool.findings.iter().map(|f| json!({
            "rule": f.rule, "field": f.field, "found": f.found,
        })).collect::<Vec<_>>(),
    })
}

pub(super) fn status_name(status: i32) -> String {
    match pb::ToolStatus::try_from(status) {
        Ok(pb::ToolStatus::Active) => "active".into(),
        Ok(pb::ToolStatus::Deprecated) => "deprecated".into(),
        Ok(pb::ToolStatus::Retired) => "retired".into(),
        Ok(pb::ToolStatus::Unspecified) | Err(_) => "?".into(),
    }
}

pub(super) fn parse_status(value: &str) -> anyhow::Result<pb::ToolStatus> {
    Ok(match value {
        "active" => pb::ToolStatus::Active,
        "deprecated" => pb::ToolStatus::Deprecated,
        "retired" => pb::ToolStatus::Retired,
        other => bail!("unknown status {other:?} (active, deprecated, retired)"),
    })
}

pub(super) fn print_tool(tool: &pb::Tool, json_out: bool) {
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
    if let Some(pin) = &tool.pin {
        out!(
            "pinned:      {} by {} at revision {}",
            pin.hash,
            pin.by,
            pin.revision
        );
    }
    for finding in &tool.findings {
        out!(
            "flagged:     {} in {}: {}",
            finding.rule,
            finding.field,
            finding.found
        );
    }
    out!("description: {}", spec.description);
}

/// Every tool `filter` selects, through all pages.
pub(super) async fn all_tools(
    admin: &mut Admin,
    filter: pb::ListToolsRequest,
) -> anyhow::Result<Vec<pb::Tool>> {
    let mut tools = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = admin
            .catalog
            .list_tools(pb::ListToolsRequest {
                page_size: 500,
                page_token: page_token.clone(),
                ..filter.clone()
            })
            .await?
            .into_inner();
        tools.extend(page.tools);
        if page.next_page_token.is_empty() {
            return Ok(tools);
        }
        page_token = page.next_page_token;
    }
}

pub(super) async fn tools(mut admin: Admin, cmd: ToolsCmd, json_out: bool) -> anyhow::Result<i32> {
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
            list(&mut admin, category, provider, status, json_out).await?;
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
            register(&mut admin, &files, json_out).await?;
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
        ToolsCmd::Drift { name, admit, adr } => {
            let admit = admit.then_some(adr);
            return drift(&mut admin, name, admit, json_out).await;
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

/// `tools list`: every page, as JSON or a table.
async fn list(
    admin: &mut Admin,
    category: String,
    provider: String,
    status: pb::ToolStatus,
    json_out: bool,
) -> anyhow::Result<()> {
    let tools = all_tools(
        admin,
        pb::ListToolsRequest {
            category,
            provider,
            status: status as i32,
            ..Default::default()
        },
    )
    .await?;
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
    Ok(())
}

/// `tools register`: each file's definitions in order; the first refusal stops the rest.
async fn register(
    admin: &mut Admin,
    files: &[std::path::PathBuf],
    json_out: bool,
) -> anyhow::Result<()> {
    let defs = read_definitions(files)?;
    if let [def] = defs.as_slice() {
        let tool = admin
            .catalog
            .register_tool(pb::RegisterToolRequest {
                tool: Some(def.into()),
            })
            .await?
            .into_inner();
        print_tool(&tool, json_out);
        return Ok(());
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
    Ok(())
}
