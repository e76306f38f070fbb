//! `toolplane.v1.Catalog`.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tp_proto::convert::try_tool_def;
use tp_proto::pb::{self, catalog_server::Catalog};
use tp_registry::DomainError;

use super::{domain, required, status};
use crate::admin_auth::author;
use crate::engine::Engine;

/// Default page size of `ListTools`.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// Largest page size of `ListTools`.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// The catalogue service.
#[derive(Debug, Clone)]
pub struct CatalogService {
    engine: Arc<Engine>,
}

impl CatalogService {
    /// Serves the engine's catalogue.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    async fn tool(&self, name: &str) -> Result<pb::Tool, Status> {
        self.engine
            .read(|state| state.tool(name).map(pb::Tool::from))
            .await
            .map_err(domain)
    }
}

/// Encodes a keyset page token (the last name of the page).
pub fn page_token(last: &str) -> String {
    format!("n.{}", hex::encode(last))
}

/// Decodes a page token; `INVALID_ARGUMENT` when it was not produced by [`page_token`].
pub fn parse_page_token(token: &str) -> Result<Option<String>, DomainError> {
    if token.is_empty() {
        return Ok(None);
    }
    let bad = || DomainError::invalid("page_token", "is not a token returned by ListTools");
    let hex_part = token.strip_prefix("n.").ok_or_else(bad)?;
    let bytes = hex::decode(hex_part).map_err(|_| bad())?;
    let name = String::from_utf8(bytes).map_err(|_| bad())?;
    tp_registry::ident::check_tool_name(&name).map_err(|_| bad())?;
    Ok(Some(name))
}

#[tonic::async_trait]
impl Catalog for CatalogService {
    async fn register_tool(
        &self,
        request: Request<pb::RegisterToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let author = author(&request);
        let def = try_tool_def(request.into_inner().tool).map_err(domain)?;
        let name = def.name.clone();
        self.engine
            .write(&author, |state| {
                Ok((state.register_tool(def.clone(), &author)?, ()))
            })
            .await
            .map_err(status)?;
        tracing::info!(tool = %name, "tool registered");
        Ok(Response::new(self.tool(&name).await?))
    }

    async fn update_tool(
        &self,
        request: Request<pb::UpdateToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let author = author(&request);
        let def = try_tool_def(request.into_inner().tool).map_err(domain)?;
        let name = def.name.clone();
        self.engine
            .write(&author, |state| {
                Ok((state.update_tool(def.clone(), &author)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.tool(&name).await?))
    }

    async fn deprecate_tool(
        &self,
        request: Request<pb::DeprecateToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("name", &request.name)?;
        // A tool is removed after its sunset date: a date already past would retire it at
        // once, which is what RetireTool is for.
        let today = crate::engine::today();
        if tp_registry::ident::check_date(&request.sunset_date).is_ok()
            && request.sunset_date < today
        {
            return Err(domain(tp_registry::DomainError::invalid(
                "sunset_date",
                format!(
                    "{} is in the past (today is {today}, UTC); a tool is removed after its sunset date, so give today or a later date, or retire it now (toolplanectl tools retire {})",
                    request.sunset_date, request.name
                ),
            )));
        }
        self.engine
            .write(&author, |state| {
                Ok((
                    state.deprecate_tool(&request.name, &request.sunset_date)?,
                    (),
                ))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.tool(&request.name).await?))
    }

    async fn retire_tool(
        &self,
        request: Request<pb::RetireToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("name", &request.name)?;
        self.engine
            .write(&author, |state| Ok((state.retire_tool(&request.name)?, ())))
            .await
            .map_err(status)?;
        Ok(Response::new(self.tool(&request.name).await?))
    }

    async fn reactivate_tool(
        &self,
        request: Request<pb::ReactivateToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("name", &request.name)?;
        self.engine
            .write(&author, |state| {
                Ok((state.reactivate_tool(&request.name)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.tool(&request.name).await?))
    }

    async fn get_tool(
        &self,
        request: Request<pb::GetToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let request = request.into_inner();
        required("name", &request.name)?;
        Ok(Response::new(self.tool(&request.name).await?))
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let request = request.into_inner();
        let page_size = super::page_size(request.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
            .map_err(domain)? as usize;
        let after = parse_page_token(&request.page_token).map_err(domain)?;
        let status_filter = match pb::ToolStatus::try_from(request.status) {
            Ok(pb::ToolStatus::Unspecified) => None,
            Ok(s) => Some(s),
            Err(_) => {
                return Err(domain(DomainError::invalid(
                    "status",
                    format!("unknown value {}", request.status),
                )));
            }
        };
        let response = self
            .engine
            .read(|state| {
                let matches = |tool: &&tp_registry::Tool| {
                    (request.category.is_empty() || tool.def.category == request.category)
                        && match request.provider.as_str() {
                            "" => true,
                            "-" => tool.def.provider.is_none(),
                            provider => tool.def.provider.as_deref() == Some(provider),
                        }
                        && status_filter
                            .is_none_or(|s| tp_proto::convert::tool_status_pb(&tool.status) == s)
                };
                let total = state.tools.values().filter(matches).count();
                let mut page: Vec<pb::Tool> = state
                    .tools
                    .values()
                    .filter(|tool| {
                        after
                            .as_deref()
                            .is_none_or(|after| tool.def.name.as_str() > after)
                    })
                    .filter(matches)
                    .take(page_size + 1)
                    .map(pb::Tool::from)
                    .collect();
                let next_page_token = if page.len() > page_size {
                    page.truncate(page_size);
                    page.last()
                        .and_then(|t| t.spec.as_ref())
                        .map(|s| page_token(&s.name))
                        .unwrap_or_default()
                } else {
                    String::new()
                };
                pb::ListToolsResponse {
                    tools: page,
                    next_page_token,
                    total: u32::try_from(total).unwrap_or(u32::MAX),
                }
            })
            .await;
        Ok(Response::new(response))
    }

    async fn upsert_provider(
        &self,
        request: Request<pb::UpsertProviderRequest>,
    ) -> Result<Response<pb::Provider>, Status> {
        let author = author(&request);
        let provider: tp_registry::Provider = request
            .into_inner()
            .provider
            .ok_or_else(|| domain(DomainError::invalid("provider", "is required")))?
            .into();
        let id = provider.id.clone();
        self.engine
            .write(&author, |state| {
                Ok((state.upsert_provider(provider.clone())?, ()))
            })
            .await
            .map_err(status)?;
        let stored = self
            .engine
            .read(|state| state.providers.get(&id).map(pb::Provider::from))
            .await;
        stored.map(Response::new).ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::Internal,
                "provider vanished after write",
            )
        })
    }

    async fn delete_provider(
        &self,
        request: Request<pb::DeleteProviderRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("id", &request.id)?;
        let written = self
            .engine
            .write(&author, |state| {
                Ok((state.delete_provider(&request.id)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(pb::DeleteResponse {
            revision: written.revision,
        }))
    }

    async fn list_providers(
        &self,
        _: Request<pb::ListProvidersRequest>,
    ) -> Result<Response<pb::ListProvidersResponse>, Status> {
        let providers = self
            .engine
            .read(|state| state.providers.values().map(pb::Provider::from).collect())
            .await;
        Ok(Response::new(pb::ListProvidersResponse { providers }))
    }

    async fn upsert_role(
        &self,
        request: Request<pb::UpsertRoleRequest>,
    ) -> Result<Response<pb::Role>, Status> {
        let author = author(&request);
        let role: tp_registry::Role = request
            .into_inner()
            .role
            .ok_or_else(|| domain(DomainError::invalid("role", "is required")))?
            .into();
        let name = role.name.clone();
        self.engine
            .write(&author, |state| Ok((state.upsert_role(role.clone())?, ())))
            .await
            .map_err(status)?;
        let stored = self
            .engine
            .read(|state| state.roles.get(&name).map(pb::Role::from))
            .await;
        stored.map(Response::new).ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::Internal,
                "role vanished after write",
            )
        })
    }

    async fn delete_role(
        &self,
        request: Request<pb::DeleteRoleRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("name", &request.name)?;
        let written = self
            .engine
            .write(&author, |state| Ok((state.delete_role(&request.name)?, ())))
            .await
            .map_err(status)?;
        Ok(Response::new(pb::DeleteResponse {
            revision: written.revision,
        }))
    }

    async fn list_roles(
        &self,
        _: Request<pb::ListRolesRequest>,
    ) -> Result<Response<pb::ListRolesResponse>, Status> {
        let roles = self
            .engine
            .read(|state| state.roles.values().map(pb::Role::from).collect())
            .await;
        Ok(Response::new(pb::ListRolesResponse { roles }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_reject_garbage() {
        assert_eq!(
            parse_page_token(&page_token("gmail")).unwrap().as_deref(),
            Some("gmail")
        );
        assert_eq!(parse_page_token("").unwrap(), None);
        for bad in ["gmail", "n.zz", "n.", "n.2f2e2e2f"] {
            assert!(parse_page_token(bad).is_err(), "{bad}");
        }
    }
}
