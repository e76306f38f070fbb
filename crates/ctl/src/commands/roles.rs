//! `roles …`.

use super::*;

pub(super) async fn roles(mut admin: Admin, cmd: RolesCmd, json_out: bool) -> anyhow::Result<i32> {
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
