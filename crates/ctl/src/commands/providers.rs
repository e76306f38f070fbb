//! `providers …`.

use super::*;

pub(super) async fn providers(
    mut admin: Admin,
    cmd: ProvidersCmd,
    json_out: bool,
) -> anyhow::Result<i32> {
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
