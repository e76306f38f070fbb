//! `adrs …`: architecture decision records.

use super::*;

pub(super) fn adr_status_name(status: i32) -> &'static str {
    match pb::AdrStatus::try_from(status) {
        Ok(pb::AdrStatus::Proposed) => "proposed",
        Ok(pb::AdrStatus::Accepted) => "accepted",
        Ok(pb::AdrStatus::Superseded) => "superseded",
        Ok(pb::AdrStatus::Rejected) => "rejected",
        Ok(pb::AdrStatus::Unspecified) | Err(_) => "?",
    }
}

pub(super) fn adr_pb(args: AdrArgs) -> anyhow::Result<pb::Adr> {
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

pub(super) fn print_adrs(adrs: &[pb::Adr], json_out: bool) {
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

pub(super) async fn adrs(mut admin: Admin, cmd: AdrsCmd, json_out: bool) -> anyhow::Result<i32> {
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

pub(super) async fn set_status(
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
