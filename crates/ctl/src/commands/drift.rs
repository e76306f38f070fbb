//! `tools drift`: the MCP upstreams' changes the control plane quarantined, and their admission.

use super::*;

/// Lists drifted tools, or shows one tool's difference (`admit`: takes it, under the ADR given
/// when there is one); exit 1 while any drift remains.
pub(super) async fn drift(
    admin: &mut Admin,
    name: Option<String>,
    admit: Option<Option<String>>,
    json_out: bool,
) -> anyhow::Result<i32> {
    let Some(name) = name else {
        let drifted: Vec<pb::Tool> = all_tools(admin, pb::ListToolsRequest::default())
            .await?
            .into_iter()
            .filter(|tool| tool.drift.is_some())
            .collect();
        print_drifted(&drifted, json_out);
        return Ok(i32::from(!drifted.is_empty()));
    };
    let tool = admin
        .catalog
        .get_tool(pb::GetToolRequest { name: name.clone() })
        .await?
        .into_inner();
    let Some(drift) = &tool.drift else {
        if !json_out {
            out!("{name}: no drift (the upstream says what was admitted)");
        } else {
            out!("{}", pretty(&json!({"tool": name, "drift": null})));
        }
        return Ok(0);
    };
    let upstream: Value = serde_json::from_str(&drift.upstream_json)
        .context("the control plane sent an unreadable upstream definition")?;
    let mut admitted = try_tool_def(tool.spec.clone())?;
    if let Some(adr) = admit {
        if adr.is_some() {
            admitted.admission.adr = adr;
        }
        return take(admin, admitted, &upstream, json_out).await;
    }
    if json_out {
        out!(
            "{}",
            pretty(&json!({
                "tool": name, "fields": drift.fields, "hidden": drift.hidden,
                "revision": drift.revision, "admitted": admitted, "upstream": upstream,
            }))
        );
    } else {
        print_difference(&name, drift, &admitted, &upstream);
    }
    Ok(1)
}

/// One line per drifted tool.
fn print_drifted(drifted: &[pb::Tool], json_out: bool) {
    if json_out {
        let rows: Vec<Value> = drifted
            .iter()
            .filter_map(|tool| {
                let drift = tool.drift.as_ref()?;
                Some(json!({
                    "tool": tool.spec.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
                    "fields": drift.fields, "hidden": drift.hidden, "revision": drift.revision,
                }))
            })
            .collect();
        out!("{}", pretty(&Value::Array(rows)));
        return;
    }
    if drifted.is_empty() {
        out!("no drift: every MCP upstream says what was admitted");
        return;
    }
    for tool in drifted {
        if let (Some(spec), Some(drift)) = (&tool.spec, &tool.drift) {
            out!(
                "{}: {} changed upstream at revision {} ({})",
                spec.name,
                drift.fields.join(", "),
                drift.revision,
                if drift.hidden {
                    "hidden until admitted"
                } else {
                    "the admitted text is served"
                }
            );
        }
    }
}

/// The admitted and the upstream's value of each differing field.
fn print_difference(
    name: &str,
    drift: &pb::ToolDrift,
    admitted: &domain::ToolDef,
    upstream: &Value,
) {
    out!(
        "{name}: the upstream changed {} (recorded at revision {}; {})",
        drift.fields.join(", "),
        drift.revision,
        if drift.hidden {
            "hidden until admitted"
        } else {
            "the admitted text is served"
        }
    );
    let admitted = serde_json::to_value(admitted).unwrap_or_default();
    for field in &drift.fields {
        let show = |value: &Value| match value {
            Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        out!("--- {field}, admitted");
        out!("{}", show(&admitted[field.as_str()]));
        out!("+++ {field}, upstream");
        out!("{}", show(&upstream[field.as_str()]));
    }
    out!(
        "admit it with: toolplanectl tools drift {name} --admit (add --adr ADR-N if it widens the tool)"
    );
}

/// Admits the upstream's definition: the admitted one with the upstream's title, description,
/// schemas and annotations, through `UpdateTool` (validation, the admission lint, a new pin).
async fn take(
    admin: &mut Admin,
    admitted: domain::ToolDef,
    upstream: &Value,
    json_out: bool,
) -> anyhow::Result<i32> {
    let upstream: domain::tool::UpstreamDefinition = serde_json::from_value(upstream.clone())
        .context("the control plane sent an unreadable upstream definition")?;
    let def = domain::ToolDef {
        title: upstream.title,
        description: upstream.description,
        input_schema: upstream.input_schema,
        output_schema: upstream.output_schema,
        annotations: upstream.annotations,
        ..admitted
    };
    let tool = admin
        .catalog
        .update_tool(pb::UpdateToolRequest {
            tool: Some((&def).into()),
        })
        .await?
        .into_inner();
    print_tool(&tool, json_out);
    Ok(0)
}
