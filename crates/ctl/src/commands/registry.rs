//! `registry --tenant T --role R`.

use super::*;

pub(super) async fn registry(
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
