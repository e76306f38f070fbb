//! The HTTP application: `/mcp` behind authentication, `/healthz` and `/readyz`, wrapped in
//! tracing, load shedding, a concurrency limit, a timeout and a body limit; `/metrics` on the
//! admin listener ([`admin_router`]).

mod auth;
mod health;
mod methods;
mod pipeline;
mod router;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{BoxError, Json, Router};
use serde_json::json;
use tokio::sync::Semaphore;
use tp_proto::Fault;

use crate::cache::{Identity, LookupError};
use crate::error::{Answering, Error};
use crate::mcp::{Caller, McpHandler};
use crate::state::EdgeState;

use self::auth::*;
use self::health::*;
use self::pipeline::*;
use self::router::*;

pub(crate) use self::router::body_timed_out;
pub use self::router::{EdgeService, admin_router, router, service};

#[cfg(test)]
mod tests;
