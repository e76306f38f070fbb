//! `policy …`: the ceiling.

use super::*;

pub(super) async fn policy(
    mut admin: Admin,
    cmd: PolicyCmd,
    json_out: bool,
) -> anyhow::Result<i32> {
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
