//! The Toolplane control plane: the one true tool catalogue, the ADR-bound tool ceiling,
//! tenants and API keys, executors, and the versioned change stream edges watch — over gRPC
//! with reflection and health.
//!
//! Reading order: [`engine`] (state + store + write path), [`api`] (handlers), [`server`]
//! (wiring), [`config`].

pub mod admin_auth;
pub mod admin_oidc;
pub mod api;
pub mod auth;
pub mod config;
pub mod drift;
pub mod engine;
pub mod files;
pub mod lifecycle;
pub mod oidc;
pub mod provider_oauth;
pub mod purge;
pub mod server;
pub mod vault;

pub use config::ControlPlaneConfig;
pub use server::{ControlPlane, Tokens};
