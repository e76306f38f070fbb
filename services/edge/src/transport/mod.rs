//! What the edge keeps of the MCP Streamable HTTP transport's state, below the MCP handlers
//! and the registry that use it: precomputed `tools/list` pages and their cursors
//! ([`pages`], [`cursor`]), the sealed session codec ([`session`]), the sealed request state of
//! calls paused for the client's input ([`request_state`]), and the ids of server → client
//! requests with the answers they wait for ([`questions`]), the SSE writer of answers that
//! carry messages before them ([`sse`]), and the rules every request must meet ([`rules`], and
//! the `Host` check: [`hosts`]), and the limits of long-lived streams ([`streams`]). None of it names the handlers, the
//! edge's state or the registry, so the request path can depend on it without cycles.

pub mod cancels;
pub mod cursor;
pub mod envelope;
pub mod heads;
pub mod hosts;
pub mod pages;
pub mod questions;
pub mod request_state;
pub mod rules;
#[cfg(test)]
mod rules_tests;
pub mod session;
pub mod sse;
pub mod streams;
