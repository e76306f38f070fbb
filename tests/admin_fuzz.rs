//! Admin requests decoded from mutated bytes: valid requests of every writing kind, encoded,
//! mutated (bit flips, byte changes, insertions, deletions, truncations), decoded again and —
//! when protobuf decoding accepts them — sent to a real control plane. Every one gets a gRPC
//! status that names a client mistake or success (never INTERNAL or a dropped connection), and
//! afterwards the control plane still holds a consistent world: the ceiling is not exceeded.

use std::collections::BTreeMap;

use prost::Message;
use tonic::Code;
use tp_proto::pb;
use tp_test_support::ControlPlaneProcess;

use crate::rng::Rng;

fn mutate(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for _ in 0..=rng.below(2) as usize / 2 {
        let at = rng.below(out.len().max(1) as u64) as usize;
        match rng.below(6) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.below(8),
            1 if !out.is_empty() => out[at] = rng.next() as u8,
            2 => out.insert(at.min(out.len()), rng.next() as u8),
            3 if !out.is_empty() => {
                out.remove(at);
            }
            4 => out.truncate(at),
            _ => {
                let end = (at + rng.below(16) as usize).min(out.len());
                let slice = out[at.min(end)..end].to_vec();
                out.splice(at.min(out.len())..at.min(out.len()), slice);
            }
        }
    }
    out
}

fn outcome<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    match result {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test]
async fn mutated_admin_requests_get_a_clear_status_and_leave_a_consistent_world() {
    let cp = ControlPlaneProcess::start(true).await;
    let mut admin = cp.admin().await;
    let mut tool = admin
        .catalog
        .get_tool(pb::GetToolRequest {
            name: "gmail".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .spec
        .unwrap();
    tool.name = "fuzzed_tool".into();
    let tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    let executor = admin
        .executors
        .get_executor(pb::GetExecutorRequest {
            name: "demo".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let adr = admin
        .policy
        .get_adr(pb::GetAdrRequest {
            id: "ADR-037".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        (
            "RegisterTool",
            pb::RegisterToolRequest {
                tool: Some(tool.clone()),
            }
            .encode_to_vec(),
        ),
        (
            "UpdateTool",
            pb::UpdateToolRequest {
                tool: Some(pb::ToolSpec {
                    name: "gmail".into(),
                    ..tool.clone()
                }),
            }
            .encode_to_vec(),
        ),
        (
            "CreateTenant",
            pb::CreateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: "fuzzco".into(),
                    ..tenant.clone()
                }),
            }
            .encode_to_vec(),
        ),
        (
            "UpdateTenant",
            pb::UpdateTenantRequest::replacing(tenant.clone()).encode_to_vec(),
        ),
        (
            "UpsertExecutor",
            pb::UpsertExecutorRequest {
                update_mask: None,
                executor: Some(executor.clone()),
            }
            .encode_to_vec(),
        ),
        (
            "CreateAdr",
            pb::CreateAdrRequest {
                adr: Some(pb::Adr {
                    id: "ADR-900".into(),
                    ..adr.clone()
                }),
            }
            .encode_to_vec(),
        ),
        (
            "AmendCeiling",
            pb::AmendCeilingRequest {
                ceiling: 36,
                adr: "ADR-037".into(),
            }
            .encode_to_vec(),
        ),
        (
            "IssueApiKey",
            pb::IssueApiKeyRequest {
                tenant: "acme".into(),
                role: "collector".into(),
                label: "fuzz".into(),
                ttl_seconds: 60,
            }
            .encode_to_vec(),
        ),
    ];
    let count: usize = std::env::var("TOOLPLANE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let mut rng = Rng(0xAD_0123_4567);
    let mut undecodable = 0;
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..count {
        let (kind, seed) = &seeds[i % seeds.len()];
        let bytes = mutate(&mut rng, seed);
        macro_rules! send {
            ($ty:ty, $client:ident . $method:ident) => {
                match <$ty>::decode(bytes.as_slice()) {
                    Ok(request) => Some(outcome(admin.$client.$method(request).await)),
                    Err(_) => None,
                }
            };
        }
        let code = match *kind {
            "RegisterTool" => send!(pb::RegisterToolRequest, catalog.register_tool),
            "UpdateTool" => send!(pb::UpdateToolRequest, catalog.update_tool),
            "CreateTenant" => send!(pb::CreateTenantRequest, tenants.create_tenant),
            "UpdateTenant" => send!(pb::UpdateTenantRequest, tenants.update_tenant),
            "UpsertExecutor" => send!(pb::UpsertExecutorRequest, executors.upsert_executor),
            "CreateAdr" => send!(pb::CreateAdrRequest, policy.create_adr),
            "AmendCeiling" => send!(pb::AmendCeilingRequest, policy.amend_ceiling),
            _ => send!(pb::IssueApiKeyRequest, tenants.issue_api_key),
        };
        let Some(code) = code else {
            undecodable += 1;
            continue;
        };
        assert!(
            !matches!(
                code,
                Code::Internal | Code::Unknown | Code::Unavailable | Code::DataLoss
            ),
            "{kind} #{i} ({bytes:?}) got {code:?}:\n{}",
            cp.process.log_text()
        );
        *codes.entry(format!("{code:?}")).or_default() += 1;
    }
    // Still serving, and the world is consistent.
    let policy = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(policy.count <= policy.ceiling, "{policy:?}");
    let listed = admin
        .catalog
        .list_tools(pb::ListToolsRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!listed.tools.is_empty());
    assert!(!cp.process.log_text().contains("panicked"));
    println!(
        "{count} mutated admin requests: {undecodable} refused by protobuf decoding, {} answered: {codes:?}; \
         ceiling {} with {} live tools",
        count - undecodable,
        policy.ceiling,
        policy.count
    );
}
