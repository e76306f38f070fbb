//! `usage`: tool calls reported by edges.

use super::*;

pub(super) async fn usage(
    mut admin: Admin,
    args: crate::UsageArgs,
    json_out: bool,
) -> anyhow::Result<i32> {
    if let Some(days) = args.unused_days {
        return unused(admin, &args.tenant, days, json_out).await;
    }
    let usage = admin
        .audit
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

/// The live tools nobody (or `tenant`) called in the last `days` days, never-called ones
/// included, oldest use first.
async fn unused(mut admin: Admin, tenant: &str, days: u32, json_out: bool) -> anyhow::Result<i32> {
    let usage = admin
        .audit
        .get_usage(pb::GetUsageRequest {
            tenant: tenant.to_owned(),
        })
        .await?
        .into_inner()
        .tools;
    let last_used: std::collections::HashMap<&str, u64> = usage
        .iter()
        .map(|u| (u.tool.as_str(), u.last_used_ms))
        .collect();
    let now = crate::output::now_ms();
    let since = now.saturating_sub(u64::from(days) * 86_400_000);
    let mut unused: Vec<(String, String, u64)> =
        super::tools::all_tools(&mut admin, pb::ListToolsRequest::default())
            .await?
            .into_iter()
            .filter(|tool| tool.status != pb::ToolStatus::Retired as i32)
            .filter_map(|tool| {
                let name = tool.spec.as_ref()?.name.clone();
                let last = last_used.get(name.as_str()).copied().unwrap_or(0);
                (last < since).then(|| (name, super::tools::status_name(tool.status), last))
            })
            .collect();
    unused.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
    if json_out {
        let values: Vec<Value> = unused
            .iter()
            .map(|(tool, status, last)| json!({"tool": tool, "status": status, "last_used_ms": last, "last_used": crate::output::when(*last, now)}))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
    } else {
        let rows: Vec<Vec<String>> = unused
            .iter()
            .map(|(tool, status, last)| {
                vec![
                    tool.clone(),
                    status.clone(),
                    crate::output::when(*last, now),
                ]
            })
            .collect();
        out!("{}", table(&["TOOL", "STATUS", "LAST USED"], &rows));
        let scope = if tenant.is_empty() {
            "any tenant".to_owned()
        } else {
            format!("tenant {tenant}")
        };
        eprintln!(
            "{} live tool(s) not called by {scope} in the last {days} day(s)",
            unused.len()
        );
    }
    Ok(0)
}
