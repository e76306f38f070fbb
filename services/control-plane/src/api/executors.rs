//! `toolplane.v1.Executors`.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tp_proto::convert::patch_executor;
use tp_proto::pb::{self, executors_server::Executors};
use tp_registry::DomainError;

use super::{domain, required, status};
use crate::admin_auth::author;
use crate::engine::Engine;

/// The `Executors` gRPC service: registering executors and reading them.
#[derive(Debug, Clone)]
pub struct ExecutorsService {
    engine: Arc<Engine>,
}

impl ExecutorsService {
    /// Serves the engine's executors.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    async fn executor(&self, name: &str) -> Result<pb::ExecutorInfo, Status> {
        self.engine
            .read(|state| state.executors.get(name).map(pb::ExecutorInfo::from))
            .await
            .ok_or_else(|| domain(DomainError::not_found("executor", name)))
    }
}

#[tonic::async_trait]
impl Executors for ExecutorsService {
    async fn upsert_executor(
        &self,
        request: Request<pb::UpsertExecutorRequest>,
    ) -> Result<Response<pb::ExecutorInfo>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        let submitted = request
            .executor
            .ok_or_else(|| domain(DomainError::invalid("executor", "is required")))?;
        let name = submitted.name.clone();
        let mask = request.update_mask;
        self.engine
            .write(&author, |state| {
                let executor =
                    patch_executor(state.executors.get(&name), submitted.clone(), mask.as_ref())?;
                Ok((state.upsert_executor(executor)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.executor(&name).await?))
    }

    async fn get_executor(
        &self,
        request: Request<pb::GetExecutorRequest>,
    ) -> Result<Response<pb::ExecutorInfo>, Status> {
        let request = request.into_inner();
        required("name", &request.name)?;
        Ok(Response::new(self.executor(&request.name).await?))
    }

    async fn list_executors(
        &self,
        _: Request<pb::ListExecutorsRequest>,
    ) -> Result<Response<pb::ListExecutorsResponse>, Status> {
        let executors = self
            .engine
            .read(|state| {
                state
                    .executors
                    .values()
                    .map(pb::ExecutorInfo::from)
                    .collect()
            })
            .await;
        Ok(Response::new(pb::ListExecutorsResponse { executors }))
    }

    async fn delete_executor(
        &self,
        request: Request<pb::DeleteExecutorRequest>,
    ) -> Result<Response<pb::DeleteExecutorResponse>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("name", &request.name)?;
        let written = self
            .engine
            .write(&author, |state| {
                Ok((state.delete_executor(&request.name)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(pb::DeleteExecutorResponse {
            revision: written.revision,
        }))
    }
}
