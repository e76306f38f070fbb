//! `toolplane.v1.Policy`: the ceiling, ADRs, and the catalogue as a document.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tp_proto::convert::{policy_status, try_adr, try_adr_status};
use tp_proto::pb::{self, policy_server::Policy};
use tp_registry::{DomainError, State, docs};

use super::{domain, required, status};
use crate::admin_auth::author;
use crate::engine::Engine;

/// Largest document `CheckDocument` accepts (bytes).
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The `Policy` gRPC service: ADRs and the tool ceiling.
#[derive(Debug, Clone)]
pub struct PolicyService {
    engine: Arc<Engine>,
}

impl PolicyService {
    /// Serves the engine's policy.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    async fn adr(&self, id: &str) -> Result<pb::Adr, Status> {
        self.engine
            .read(|state| state.adr(id).map(pb::Adr::from))
            .await
            .map_err(domain)
    }
}

fn current_policy(state: &State) -> Result<pb::PolicyStatus, DomainError> {
    let report = state.ceiling_report()?;
    Ok(policy_status(&report, state.policy()?, state.revision))
}

#[tonic::async_trait]
impl Policy for PolicyService {
    async fn get_policy(
        &self,
        _: Request<pb::GetPolicyRequest>,
    ) -> Result<Response<pb::PolicyStatus>, Status> {
        let policy = self.engine.read(current_policy).await.map_err(domain)?;
        Ok(Response::new(policy))
    }

    async fn amend_ceiling(
        &self,
        request: Request<pb::AmendCeilingRequest>,
    ) -> Result<Response<pb::PolicyStatus>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("adr", &request.adr)?;
        self.engine
            .write(&author, |state| {
                Ok((state.amend_ceiling(request.ceiling, &request.adr)?, ()))
            })
            .await
            .map_err(status)?;
        tracing::info!(ceiling = request.ceiling, adr = %request.adr, "ceiling amended");
        let policy = self.engine.read(current_policy).await.map_err(domain)?;
        Ok(Response::new(policy))
    }

    async fn create_adr(
        &self,
        request: Request<pb::CreateAdrRequest>,
    ) -> Result<Response<pb::Adr>, Status> {
        let author = author(&request);
        let adr = try_adr(request.into_inner().adr).map_err(domain)?;
        let id = adr.id.clone();
        self.engine
            .write(&author, |state| Ok((state.create_adr(adr.clone())?, ())))
            .await
            .map_err(status)?;
        Ok(Response::new(self.adr(&id).await?))
    }

    async fn update_adr(
        &self,
        request: Request<pb::UpdateAdrRequest>,
    ) -> Result<Response<pb::Adr>, Status> {
        let author = author(&request);
        let adr = try_adr(request.into_inner().adr).map_err(domain)?;
        let id = adr.id.clone();
        self.engine
            .write(&author, |state| Ok((state.update_adr(adr.clone())?, ())))
            .await
            .map_err(status)?;
        Ok(Response::new(self.adr(&id).await?))
    }

    async fn set_adr_status(
        &self,
        request: Request<pb::SetAdrStatusRequest>,
    ) -> Result<Response<pb::Adr>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("id", &request.id)?;
        let next = try_adr_status(request.status, None).map_err(domain)?;
        self.engine
            .write(&author, |state| {
                Ok((state.set_adr_status(&request.id, next)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.adr(&request.id).await?))
    }

    async fn get_adr(
        &self,
        request: Request<pb::GetAdrRequest>,
    ) -> Result<Response<pb::Adr>, Status> {
        let request = request.into_inner();
        required("id", &request.id)?;
        Ok(Response::new(self.adr(&request.id).await?))
    }

    async fn list_adrs(
        &self,
        _: Request<pb::ListAdrsRequest>,
    ) -> Result<Response<pb::ListAdrsResponse>, Status> {
        let adrs = self
            .engine
            .read(|state| state.adrs.values().map(pb::Adr::from).collect())
            .await;
        Ok(Response::new(pb::ListAdrsResponse { adrs }))
    }

    async fn render_tools_doc(
        &self,
        _: Request<pb::RenderToolsDocRequest>,
    ) -> Result<Response<pb::RenderToolsDocResponse>, Status> {
        let markdown = self
            .engine
            .read(|state| {
                state
                    .ceiling_report()
                    .map(|report| docs::render_tools_md(&report, state.tools.values()))
            })
            .await
            .map_err(domain)?;
        Ok(Response::new(pb::RenderToolsDocResponse { markdown }))
    }

    async fn check_document(
        &self,
        request: Request<pb::CheckDocumentRequest>,
    ) -> Result<Response<pb::CheckDocumentResponse>, Status> {
        let request = request.into_inner();
        if request.text.len() > MAX_DOCUMENT_BYTES {
            return Err(domain(DomainError::invalid(
                "text",
                format!(
                    "is {} bytes; the limit is {MAX_DOCUMENT_BYTES}",
                    request.text.len()
                ),
            )));
        }
        let (actual, rendered) = self
            .engine
            .read(|state| {
                let rendered = state
                    .ceiling_report()
                    .map(|report| docs::render_tools_md(&report, state.tools.values()))
                    .unwrap_or_default();
                (state.live_tool_count() as u64, rendered)
            })
            .await;
        let line = |line: usize| u32::try_from(line).unwrap_or(u32::MAX);
        let counts = docs::check_drift(&request.text, actual)
            .into_iter()
            .map(|f| pb::DriftFinding {
                line: line(f.line),
                text: f.text,
                stated: f.stated,
                actual: f.actual,
                ..Default::default()
            });
        let rows = docs::check_rows(&request.text, &rendered)
            .into_iter()
            .map(|f| pb::DriftFinding {
                line: line(f.line),
                text: f.stated,
                tool: f.tool,
                column: f.column,
                catalogue: f.catalogue,
                ..Default::default()
            });
        let findings = counts.chain(rows).collect();
        Ok(Response::new(pb::CheckDocumentResponse {
            actual,
            findings,
        }))
    }
}
