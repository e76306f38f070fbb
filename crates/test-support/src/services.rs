//! Real services for tests: `redis-server`, the demo executor and edges, each a child process
//! on its own port.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::process::{ControlPlaneProcess, Process, wait_ready};
use crate::{binary, eventually, executor_key};

/// A free TCP port on 127.0.0.1 (bound then released; fine for tests).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A private `redis-server` (no persistence).
#[derive(Debug)]
pub struct RedisProcess {
    /// The running `redis-server` (killed when dropped).
    pub process: Process,
    /// The free port it listens on, on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

async fn redis_ping(port: u16) -> bool {
    let Ok(Ok(mut stream)) = tokio::time::timeout(
        Duration::from_millis(500),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    else {
        return false;
    };
    if stream.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut buffer = [0u8; 16];
    matches!(tokio::time::timeout(Duration::from_millis(500), stream.read(&mut buffer)).await, Ok(Ok(n)) if buffer[..n].starts_with(b"+PONG"))
}

// === impl RedisProcess ===

impl RedisProcess {
    /// Starts `redis-server` on a free port.
    pub async fn start() -> RedisProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let process = Self::spawn(dir.path(), port);
        let mut redis = RedisProcess { process, port, dir };
        redis.wait().await;
        redis
    }

    fn spawn(dir: &Path, port: u16) -> Process {
        let program = which("redis-server").unwrap_or_else(|| {
            panic!("redis-server is not installed: run `apt-get install -y redis-server` (bash scripts/prereqs.sh does)")
        });
        let args: Vec<String> = [
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.display().to_string(),
            "--daemonize",
            "no",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        Process::spawn(&program, &args, &dir.join(format!("redis-{port}.log")), &[])
    }

    async fn wait(&mut self) {
        let port = self.port;
        eventually(
            "redis-server to answer PING",
            Duration::from_secs(20),
            || async move { redis_ping(port).await.then_some(()) },
        )
        .await;
    }

    /// `redis://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// SIGKILL.
    pub async fn kill9(&mut self) {
        self.process.kill9().await;
    }

    /// Starts it again on the same port (empty: no persistence).
    pub async fn restart(&mut self) {
        self.process = Self::spawn(self.dir.path(), self.port);
        self.wait().await;
    }
}

/// Waits (up to 30 s) until something accepts TCP connections on `127.0.0.1:port`.
pub async fn wait_for_port(port: u16, what: &str) {
    eventually(what, Duration::from_secs(30), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
}

/// Finds a program on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|path| path.exists())
}

/// The demo executor.
#[derive(Debug)]
pub struct ExecutorProcess {
    /// The running demo executor (killed when dropped).
    pub process: Process,
    /// `127.0.0.1:port`.
    pub addr: String,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

// === impl ExecutorProcess ===

impl ExecutorProcess {
    /// Starts `tp-demo-executor` on a free port.
    pub async fn start() -> ExecutorProcess {
        Self::start_with_args(Vec::new()).await
    }

    /// Starts `tp-demo-executor` on a free port with extra flags.
    pub async fn start_with_args(extra: Vec<String>) -> ExecutorProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let (process, addr) = Self::spawn(dir.path(), "127.0.0.1:0", &extra).await;
        ExecutorProcess {
            process,
            addr,
            dir,
            extra,
        }
    }

    async fn spawn(dir: &Path, listen: &str, extra: &[String]) -> (Process, String) {
        let ready = dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        let mut args = vec![
            "--listen".to_owned(),
            listen.to_owned(),
            "--ready-file".to_owned(),
            ready.display().to_string(),
        ];
        if !extra
            .iter()
            .any(|a| a == "--allow-unsigned" || a == "--auth-key-file")
        {
            args.push("--auth-key-file".to_owned());
            args.push(executor_key().1.display().to_string());
        }
        args.extend_from_slice(extra);
        let mut process = Process::spawn(
            &binary("tp-demo-executor"),
            &args,
            &dir.join("executor.log"),
            &[],
        );
        let addr = wait_ready(&ready, &mut process).await;
        (process, addr)
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL.
    pub async fn kill9(&mut self) {
        self.process.kill9().await;
    }

    /// Starts it again on the same address.
    pub async fn restart(&mut self) {
        let (process, addr) =
            Self::spawn(self.dir.path(), &self.addr.clone(), &self.extra.clone()).await;
        self.process = process;
        self.addr = addr;
    }
}

/// The wiki service (`tp-wiki`) on a free port with its own data folder; fetching URLs on
/// loopback over plain http is allowed (tests serve sources locally).
#[derive(Debug)]
pub struct WikiProcess {
    /// The running wiki service (killed when dropped).
    pub process: Process,
    /// `127.0.0.1:port`.
    pub addr: String,
    /// The data folder (`wiki/{tenant}/…` lives here).
    pub dir: tempfile::TempDir,
}

impl WikiProcess {
    /// Starts `tp-wiki`, fetching from loopback over plain http allowed (tests serve sources
    /// locally).
    pub async fn start() -> WikiProcess {
        Self::start_with(&["--allow-private-urls", "--allow-http"]).await
    }

    /// Starts `tp-wiki` with the production URL rules (https, public addresses only).
    pub async fn start_strict() -> WikiProcess {
        Self::start_with(&[]).await
    }

    /// Starts `tp-wiki` with loopback fetching allowed and `extra` arguments.
    pub async fn start_with_args(extra: &[&str]) -> WikiProcess {
        let mut args = vec!["--allow-private-urls", "--allow-http"];
        args.extend_from_slice(extra);
        Self::start_with(&args).await
    }

    /// Starts `tp-wiki` with loopback fetching allowed and environment variables (e.g. the
    /// `OTEL_*` ones).
    pub async fn start_with_env(envs: &[(&str, String)]) -> WikiProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let (process, addr) = Self::spawn_with_env(
            dir.path(),
            "127.0.0.1:0",
            &["--allow-private-urls", "--allow-http"],
            envs,
        )
        .await;
        WikiProcess { process, addr, dir }
    }

    async fn start_with(extra: &[&str]) -> WikiProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let (process, addr) = Self::spawn(dir.path(), "127.0.0.1:0", extra).await;
        WikiProcess { process, addr, dir }
    }

    async fn spawn(dir: &Path, listen: &str, extra: &[&str]) -> (Process, String) {
        Self::spawn_with_env(dir, listen, extra, &[]).await
    }

    async fn spawn_with_env(
        dir: &Path,
        listen: &str,
        extra: &[&str],
        envs: &[(&str, String)],
    ) -> (Process, String) {
        let ready = dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        let mut args = vec![
            "--listen".to_owned(),
            listen.to_owned(),
            "--data-dir".to_owned(),
            dir.join("data").display().to_string(),
            "--auth-key-file".to_owned(),
            executor_key().1.display().to_string(),
            "--ready-file".to_owned(),
            ready.display().to_string(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut process = Process::spawn(&binary("tp-wiki"), &args, &dir.join("wiki.log"), envs);
        let addr = wait_ready(&ready, &mut process).await;
        (process, addr)
    }

    /// SIGKILL, then start again on the same data folder and address.
    pub async fn kill9_and_restart(&mut self) {
        self.process.kill9().await;
        let (process, addr) = Self::spawn(
            self.dir.path(),
            &self.addr.clone(),
            &["--allow-private-urls", "--allow-http"],
        )
        .await;
        self.process = process;
        self.addr = addr;
    }

    /// The pages folder of `tenant` (`data/wiki/{tenant}`).
    pub fn tenant_dir(&self, tenant: &str) -> PathBuf {
        self.dir.path().join("data/wiki").join(tenant)
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A running `tp-edge` with a configuration of its own, in a temporary folder.
#[derive(Debug)]
pub struct EdgeProcess {
    /// The running edge (killed when dropped).
    pub process: Process,
    /// `127.0.0.1:port`.
    pub addr: String,
    /// The admin listener (`/metrics`), `127.0.0.1:port`.
    pub admin_addr: String,
    dir: tempfile::TempDir,
}

// === impl EdgeProcess ===

impl EdgeProcess {
    /// Starts `tp-edge` against `control_planes` with the edge token of `cp`, an optional
    /// Redis, and extra TOML appended to its configuration.
    pub async fn start(
        cp: &ControlPlaneProcess,
        control_planes: &[String],
        redis: Option<&str>,
        extra_toml: &str,
    ) -> EdgeProcess {
        Self::start_with_env(cp, control_planes, redis, extra_toml, &[]).await
    }

    /// [`EdgeProcess::start`] with environment variables (e.g. an MCP upstream's credential).
    pub async fn start_with_env(
        cp: &ControlPlaneProcess,
        control_planes: &[String],
        redis: Option<&str>,
        extra_toml: &str,
        envs: &[(&str, String)],
    ) -> EdgeProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let urls: Vec<String> = control_planes.iter().map(|u| format!("{u:?}")).collect();
        let config = format!(
            "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ncontrol_plane = [{}]\nedge_token_file = {:?}\nredis_url = {:?}\n\n[watch]\nheartbeat_ms = 200\ndead_after_ms = 1500\nmax_backoff_ms = 500\n\n[audit]\nflush_ms = 200\n\n{extra_toml}\n",
            urls.join(", "),
            cp.data_dir.join("edge-token").display().to_string(),
            redis.unwrap_or(""),
        );
        let config_path = dir.path().join("edge.toml");
        std::fs::write(&config_path, config).expect("edge config");
        let ready = dir.path().join("ready");
        let args = vec![
            "--config".to_owned(),
            config_path.display().to_string(),
            "--ready-file".to_owned(),
            ready.display().to_string(),
        ];
        // The tests' executors accept the tests' key; a caller may set its own.
        let mut envs: Vec<(&str, String)> = envs.to_vec();
        if !envs
            .iter()
            .any(|(k, _)| *k == "TOOLPLANE_EDGE_EXECUTORS__AUTH_KEY")
            && !extra_toml.contains("auth_key")
        {
            envs.push((
                "TOOLPLANE_EDGE_EXECUTORS__AUTH_KEY",
                executor_key().0.clone(),
            ));
        }
        // Tests stop edges often: no grace period unless a test asks for one.
        if !envs
            .iter()
            .any(|(k, _)| *k == "TOOLPLANE_EDGE_SHUTDOWN__GRACE_MS")
            && !extra_toml.contains("grace_ms")
        {
            envs.push(("TOOLPLANE_EDGE_SHUTDOWN__GRACE_MS", "0".to_owned()));
        }
        let mut process = Process::spawn(
            &binary("tp-edge"),
            &args,
            &dir.path().join("edge.log"),
            &envs,
        );
        let ready_text = wait_ready(&ready, &mut process).await;
        let mut lines = ready_text.lines();
        let addr = lines.next().unwrap_or_default().trim().to_owned();
        let admin_addr = lines.next().unwrap_or_default().trim().to_owned();
        EdgeProcess {
            process,
            addr,
            admin_addr,
            dir,
        }
    }

    /// GET a path of the admin listener (`/metrics`), returning status and body.
    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        get(&self.admin_addr, path).await
    }

    /// The edge's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("edge.log")).unwrap_or_default()
    }

    /// GET a path (e.g. `/readyz`), returning status and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        get(&self.addr, path).await
    }
}

async fn get(addr: &str, path: &str) -> (u16, String) {
    {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }
}
