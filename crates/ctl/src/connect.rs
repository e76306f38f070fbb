//! Where the admin commands find the control plane and its token, and what they say when it is
//! not there: `--addr` / `TOOLPLANE_ADDR`, else the `grpc_addr` that `up` wrote into
//! `.toolplane/credentials.json`, else 127.0.0.1:50051. An address without a scheme is taken
//! as `http://`. A failure names the address tried, where it came from and how to point the CLI
//! elsewhere; an address that answers HTTP but not gRPC is looked at once more, so the CLI can
//! say that it is an MCP edge (whose `/readyz` tells it apart) rather than print a decoding
//! error.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::Cli;

/// The credentials file `up` writes, relative to the working directory.
pub(crate) const CREDENTIALS: &str = ".toolplane/credentials.json";
const DEFAULT_ADDR: &str = "127.0.0.1:50051";
const DEFAULT_TOKEN_FILE: &str = ".toolplane/admin-token";

/// The address to use and where it came from (for messages).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `http://host:port`.
    pub(crate) url: String,
    /// "--addr or TOOLPLANE_ADDR", "grpc_addr in .toolplane/credentials.json", "the default".
    pub(crate) source: String,
}

fn credentials() -> Option<Value> {
    let text = std::fs::read_to_string(CREDENTIALS).ok()?;
    serde_json::from_str(&text).ok()
}

/// `host:port` becomes `http://host:port`; URLs are kept.
pub(crate) fn normalise(addr: &str) -> String {
    let addr = addr.trim();
    if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    }
}

/// Where the control plane is, by the rules above (a profile's `addr` after `--addr`).
pub(crate) fn target(cli: &Cli, profile: Option<&(String, crate::profiles::Profile)>) -> Target {
    if let Some(addr) = &cli.addr {
        return Target {
            url: normalise(addr),
            source: "--addr or TOOLPLANE_ADDR".into(),
        };
    }
    if let Some((name, profile)) = profile
        && let Some(addr) = &profile.addr
    {
        return Target {
            url: normalise(addr),
            source: format!("profile {name}"),
        };
    }
    if let Some(addr) = credentials()
        .as_ref()
        .and_then(|c| c["grpc_addr"].as_str().map(str::to_owned))
    {
        return Target {
            url: normalise(&addr),
            source: format!("grpc_addr in {CREDENTIALS}"),
        };
    }
    Target {
        url: normalise(DEFAULT_ADDR),
        source: format!("the default (no --addr, no TOOLPLANE_ADDR, no {CREDENTIALS})"),
    }
}

/// The admin token: `--token` / `TOOLPLANE_ADMIN_TOKEN`, else the token file (`--token-file`,
/// else `admin_token_file` in the credentials, else `.toolplane/admin-token`).
pub(crate) fn token(
    cli: &Cli,
    profile: Option<&(String, crate::profiles::Profile)>,
) -> anyhow::Result<String> {
    if let Some(token) = &cli.token {
        return Ok(token.clone());
    }
    if cli.token_file.is_none()
        && let Some((name, profile)) = profile
        && let Some(token) = crate::profiles::token(name, profile)?
    {
        return Ok(token);
    }
    let file: PathBuf = match &cli.token_file {
        Some(file) => file.clone(),
        None => credentials()
            .as_ref()
            .and_then(|c| c["admin_token_file"].as_str().map(PathBuf::from))
            .filter(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TOKEN_FILE)),
    };
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "no admin token: pass --token, set TOOLPLANE_ADMIN_TOKEN, or point --token-file at the \
             control plane's admin-token (tried {})",
            file.display()
        )
    })?;
    Ok(text.trim().to_owned())
}

/// How to point the CLI at a control plane, for the end of error messages.
fn how_to_point() -> String {
    format!(
        "start one with `toolplane up`, or point the CLI at it with --addr HOST:PORT or \
         TOOLPLANE_ADDR (`up` writes its address as grpc_addr in {CREDENTIALS})"
    )
}

/// The error for a control plane that could not be reached.
pub(crate) fn unreachable(target: &Target, error: &dyn std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot reach the control plane at {} (from {}): {error}\n  {}",
        target.url,
        target.source,
        how_to_point()
    )
}

/// Whether a status is what tonic makes of an answer that is not gRPC.
fn not_grpc(status: &tonic::Status) -> bool {
    let message = status.message();
    matches!(
        status.code(),
        tonic::Code::Unknown
            | tonic::Code::Internal
            | tonic::Code::Unimplemented
            | tonic::Code::Unavailable
            // hyper gives up on a connection closed mid-handshake as a cancellation.
            | tonic::Code::Cancelled
    ) && [
        "grpc-status header missing",
        "HTTP status code",
        "content-type",
        "protocol error",
        "frame with invalid size",
        // An HTTP/1-only server hangs up on the HTTP/2 preface.
        "transport error",
        "connection closed",
        "operation was canceled",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// Explains an error of a command: a status that is not gRPC's becomes what the address
/// really is, if it can be told.
pub(crate) async fn explain(target: &Target, error: anyhow::Error) -> anyhow::Error {
    let Some(status) = error.downcast_ref::<tonic::Status>() else {
        return error;
    };
    if !not_grpc(status) {
        return error;
    }
    let what = match probe_readyz(&target.url).await {
        Some(body) if body.get("control_plane").is_some() && body.get("cache").is_some() => {
            format!(
                "{} is a Toolplane MCP edge (it serves MCP at /mcp), not the control plane",
                target.url
            )
        }
        Some(_) => format!(
            "{} answers HTTP, but not as a gRPC control plane ({})",
            target.url,
            status.message()
        ),
        // Nothing that answers plain HTTP either: a TLS problem, or the error as it came.
        None => {
            return match tls_problem(target, &format!("{error:#}")) {
                Some(tls) => anyhow::anyhow!("{tls}"),
                None => error,
            };
        }
    };
    anyhow::anyhow!(
        "{what}; the address came from {}.\n  {}",
        target.source,
        how_to_point()
    )
}

/// What is wrong with TLS, when an error looks like a failed handshake: which setting is
/// missing or which side refused, instead of "connection closed".
pub(crate) fn tls_problem(target: &Target, error: &str) -> Option<String> {
    let lower = error.to_ascii_lowercase();
    let handshake = [
        "connection closed",
        "operation was cancel",
        "certificate",
        "handshake",
        "tls",
        "unknownissuer",
        "broken pipe",
        "connection reset",
    ]
    .iter()
    .any(|needle| lower.contains(needle));
    if !handshake {
        return None;
    }
    let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
    let settings = "in the profile (ca_file, client_cert_file, client_key_file) or as TOOLPLANE_TLS_CA_FILE, TOOLPLANE_TLS_CLIENT_CERT_FILE and TOOLPLANE_TLS_CLIENT_KEY_FILE";
    if target.url.starts_with("http://") {
        return Some(format!(
            "the control plane at {} (from {}) closed the connection: if it serves TLS, use an https:// address (and its CA {settings})",
            target.url, target.source
        ));
    }
    let mut missing = Vec::new();
    if !set("TOOLPLANE_TLS_CA_FILE") && !target.source.starts_with("profile") {
        missing.push("TOOLPLANE_TLS_CA_FILE is not set (the system's roots are not used: the control plane's CA must be named)");
    }
    if !set("TOOLPLANE_TLS_CLIENT_CERT_FILE") && !target.source.starts_with("profile") {
        missing.push("TOOLPLANE_TLS_CLIENT_CERT_FILE and TOOLPLANE_TLS_CLIENT_KEY_FILE are not set (a control plane that requires client certificates closes the connection without one)");
    }
    Some(format!(
        "the TLS handshake with the control plane at {} (from {}) failed: {error}{}{}\n  set the CA and the client certificate {settings}",
        target.url,
        target.source,
        if missing.is_empty() { "" } else { "\n  " },
        missing.join("\n  ")
    ))
}

/// `GET /readyz` over HTTP/1.1, for telling an edge apart; `None` when that is not HTTP/1.1
/// JSON.
async fn probe_readyz(url: &str) -> Option<Value> {
    let authority = url.split("://").nth(1)?.split('/').next()?.to_owned();
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(&authority).await.ok()?;
        let request =
            format!("GET /readyz HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut reply = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut reply).await.ok()?;
        let text = String::from_utf8_lossy(&reply);
        let body = text.split("\r\n\r\n").nth(1)?;
        serde_json::from_str(body.trim()).ok()
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
}
