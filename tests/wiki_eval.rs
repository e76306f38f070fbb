//! The wiki's evaluation on four genres, run through the edge with the official Python SDK
//! (issue 32; `tests/wiki_eval/` holds the corpora and the scoring, `docs/wiki.md` the figures).
//!
//! Every genre is split by entity into a development half and a held-out half
//! (`corpora.half`); this test runs the held-out halves (set `WIKI_EVAL_HALVES=dev,held-out` to
//! run both) on fresh tenants — one with the planted defects, one with the defect-free corpus,
//! one with the same documents in another order — prints the table per genre and half, and
//! fails when a held-out figure falls below its enforced floor in
//! `tests/wiki_eval/floors.json`.

use std::time::Duration;

use tp_proto::pb;
use tp_test_support::python;

use crate::fleet::Fleet;

const GENRES: &[&str] = &["countries", "elements", "releases", "business"];
const VARIANTS: &[&str] = &["main", "clean", "shuffled"];

#[tokio::test]
async fn the_wiki_meets_its_floors_on_held_out_halves_of_four_genres_through_the_edge() {
    let halves = std::env::var("WIKI_EVAL_HALVES").unwrap_or_else(|_| "held-out".to_owned());
    let fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    let mut keys = serde_json::Map::new();
    for half in halves.split(',') {
        for genre in GENRES {
            for variant in VARIANTS {
                let tenant = format!(
                    "eval-{genre}-{}-{variant}",
                    half.chars().next().unwrap_or('h')
                );
                admin
                    .tenants
                    .create_tenant(pb::CreateTenantRequest {
                        tenant: Some(pb::Tenant {
                            id: tenant.clone(),
                            connected_apis: Some(pb::ConnectedApis::default()),
                            ..Default::default()
                        }),
                    })
                    .await
                    .unwrap();
                let key = tp_test_support::admin::issue_key(&mut admin, &tenant, "collector").await;
                keys.insert(format!("{genre}/{half}/{variant}"), key.into());
            }
        }
    }
    let work = tempfile::tempdir().unwrap();
    let keys_file = work.path().join("keys.json");
    std::fs::write(&keys_file, serde_json::Value::Object(keys).to_string()).unwrap();
    let report = std::env::var_os("WIKI_EVAL_REPORT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| work.path().join("report.json"));
    let cache = tp_test_support::target_dir().join("eval-corpus/wiki-eval");
    let folder = std::fs::canonicalize("wiki_eval").unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(1500),
        tokio::process::Command::new(python())
            .arg(folder.join("evaluate.py"))
            .arg(format!("http://{}/mcp", fleet.edges[0].addr))
            .arg(&keys_file)
            .arg(&cache)
            .arg(&halves)
            .arg(&report)
            .arg(folder.join("floors.json"))
            .current_dir(&folder)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the evaluation did not finish in 25 minutes")
    .expect("spawn python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the wiki evaluation failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
