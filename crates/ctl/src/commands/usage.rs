//! `usage`: tool calls reported by edges.

use super::*;

pub(super) async fn usage(
    mut admin: Admin,
    args: crate::UsageArgs,
    json_out: bool,
) -> anyhow::Result<i32> {
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
