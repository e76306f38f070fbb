//! `audit`: the audit trail, one record per tool call, filtered and paged through.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::*;

/// The outcomes `--outcome` takes, as the control plane stores them.
pub(crate) fn outcomes() -> Vec<&'static str> {
    tp_proto::convert::OUTCOME_NAMES
        .iter()
        .map(|(_, name)| *name)
        .collect()
}

fn outcome_name(value: i32) -> &'static str {
    pb::CallOutcome::try_from(value).map_or("unspecified", tp_proto::convert::outcome_name)
}

/// A point in time for `--since`/`--until`: an RFC 3339 timestamp
/// (`2026-11-25T10:00:00Z`), or an age counted back from now (`90s`, `30m`, `12h`, `7d`).
/// Unix milliseconds.
pub(crate) fn parse_when(text: &str) -> Result<u64, String> {
    let now = crate::output::now_ms();
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        let ms = at.unix_timestamp_nanos() / 1_000_000;
        return u64::try_from(ms).map_err(|_| format!("{text:?} is before 1970"));
    }
    let bad = || {
        format!(
            "{text:?} is neither an RFC 3339 time (2026-11-25T10:00:00Z) nor an age like 90s, 30m, 12h or 7d"
        )
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    let age = number
        .checked_mul(unit_ms)
        .filter(|age| *age <= now)
        .ok_or_else(|| format!("{text:?} reaches back before 1970"))?;
    Ok(now - age)
}

/// RFC 3339 of Unix milliseconds.
/// RFC 3339 in UTC with milliseconds, always the same width (so a table's column lines up).
fn rfc3339(at_ms: u64) -> String {
    const FORMAT: &[time::format_description::FormatItem<'static>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(at_ms) * 1_000_000)
        .ok()
        .and_then(|at| at.format(FORMAT).ok())
        .unwrap_or_default()
}

fn line(record: &pb::AuditRecord) -> Value {
    json!({
        "seq": record.seq,
        "at": rfc3339(record.at_ms),
        "at_ms": record.at_ms,
        "request_id": record.request_id,
        "edge": record.edge,
        "tenant": record.tenant,
        "principal": record.principal,
        "role": record.role,
        "tool": record.tool,
        "action": record.action,
        "outcome": outcome_name(record.outcome),
        "error_code": record.error_code,
        "duration_ms": record.duration_ms,
        "approval": record.approval.as_ref().map(|a| json!({
            "state": tp_proto::convert::APPROVAL_STATE_NAMES
                .iter()
                .find(|(s, _)| *s as i32 == a.state)
                .map_or("unspecified", |(_, name)| name),
            "reason": a.reason,
            "shown": a.shown,
            "answered_by": a.answered_by,
            "answered_at": (a.answered_at_ms > 0).then(|| rfc3339(a.answered_at_ms)),
        })),
    })
}

pub(super) async fn audit(
    mut admin: Admin,
    args: crate::AuditArgs,
    json_out: bool,
) -> anyhow::Result<i32> {
    let mut request = pb::ListAuditRecordsRequest {
        tenant: args.tenant,
        tool: args.tool,
        principal: args.principal,
        outcome: args
            .outcome
            .as_deref()
            .map_or(0, |o| tp_proto::convert::outcome_named(o) as i32),
        since_ms: args.since.unwrap_or(0),
        until_ms: args.until.unwrap_or(0),
        page_size: 1000,
        page_token: String::new(),
        newest_first: !args.oldest_first,
    };
    let mut left = args.limit.map_or(usize::MAX, |n| n as usize);
    let mut rows = Vec::new();
    let mut shed: std::collections::BTreeMap<String, u64>;
    // JSON lines stream a page at a time, so an export of any size runs in little memory.
    loop {
        let page = admin
            .audit
            .list_audit_records(request.clone())
            .await?
            .into_inner();
        shed = page.shed_by_edge.into_iter().collect();
        for record in page.records.iter().take(left) {
            if json_out {
                out!("{}", line(record));
            } else {
                rows.push(vec![
                    rfc3339(record.at_ms),
                    record.tenant.clone(),
                    or_dash(&record.principal),
                    record.tool.clone(),
                    or_dash(&record.action),
                    outcome_name(record.outcome).to_owned(),
                    or_dash(&record.error_code),
                    record.duration_ms.to_string(),
                    record.request_id.clone(),
                ]);
            }
        }
        left = left.saturating_sub(page.records.len());
        if left == 0 || page.next_page_token.is_empty() {
            break;
        }
        request.page_token = page.next_page_token;
    }
    if !json_out {
        out!(
            "{}",
            table(
                &[
                    "AT",
                    "TENANT",
                    "PRINCIPAL",
                    "TOOL",
                    "ACTION",
                    "OUTCOME",
                    "CODE",
                    "MS",
                    "REQUEST"
                ],
                &rows
            )
        );
    }
    let total: u64 = shed.values().sum();
    if total > 0 {
        let by_edge: Vec<String> = shed.iter().map(|(e, n)| format!("{e}: {n}")).collect();
        eprintln!(
            "note: edges shed {total} audit records they could not deliver ({}); the trail has gaps there",
            by_edge.join(", ")
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc_3339_or_ages() {
        assert_eq!(parse_when("1970-01-01T00:00:01Z"), Ok(1000));
        assert_eq!(
            parse_when("2026-11-25T10:00:00+01:00"),
            Ok(1_795_597_200_000)
        );
        let now = crate::output::now_ms();
        let day = parse_when("1d").unwrap();
        assert!(now - day >= 86_400_000 && now - day < 86_460_000);
        for bad in ["", "d", "5", "5w", "-5m", "yesterday", "99999999999999999d"] {
            assert!(parse_when(bad).is_err(), "{bad}");
        }
        assert_eq!(rfc3339(1000), "1970-01-01T00:00:01.000Z");
        assert_eq!(rfc3339(1_795_343_400_123), "2026-11-22T10:30:00.123Z");
    }
}
