//! Child processes of the workspace's binaries.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::{binary, eventually};

/// A child process killed on drop, with its log file.
#[derive(Debug)]
pub struct Process {
    child: Child,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
}

// === impl Process ===

impl Process {
    /// Starts `program` with `args`, logging to `log`.
    pub fn spawn(program: &Path, args: &[String], log: &Path, envs: &[(&str, String)]) -> Process {
        let file = std::fs::File::create(log).expect("log file");
        // Each binary's own default levels apply unless the test run sets RUST_LOG (inherited).
        let child = Command::new(program)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        Process {
            child,
            log: log.to_path_buf(),
        }
    }

    /// SIGKILL, and wait for the exit.
    pub async fn kill9(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM (graceful), and wait up to 10 s for the exit status.
    pub async fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .ok()?
            .ok()
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The log so far (for assertion messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

/// Waits for a ready file written by a binary started with `--ready-file`, returns its content.
pub async fn wait_ready(path: &Path, process: &mut Process) -> String {
    eventually(
        &format!("{} to be ready", path.display()),
        Duration::from_secs(60),
        || {
            let exited = process.has_exited();
            let text = std::fs::read_to_string(path).ok();
            async move {
                assert!(
                    !exited || text.is_some(),
                    "process exited before it was ready"
                );
                text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
            }
        },
    )
    .await
}

/// A `tp-control-plane` child process on a free port with its own data directory.
#[derive(Debug)]
pub struct ControlPlaneProcess {
    /// The running control plane (killed when dropped).
    pub process: Process,
    /// `127.0.0.1:port`.
    pub addr: String,
    /// The data directory (kept across restarts).
    pub data_dir: PathBuf,
    /// Extra arguments it was started with.
    args: Vec<String>,
    /// Environment it was started with.
    envs: Vec<(&'static str, String)>,
    _temp: Option<tempfile::TempDir>,
}

// === impl ControlPlaneProcess ===

impl ControlPlaneProcess {
    /// Starts a control plane on a fresh data directory; `demo` seeds the demo world.
    pub async fn start(demo: bool) -> ControlPlaneProcess {
        let temp = tempfile::tempdir().expect("tempdir");
        let mut args = Vec::new();
        if demo {
            args.push("--demo".to_owned());
        }
        let mut control_plane = Self::start_in(temp.path(), args).await;
        control_plane._temp = Some(temp);
        control_plane
    }

    /// Starts a control plane seeded with the demo world on a fresh data directory, with
    /// environment variables (e.g. `TOOLPLANE_CP_LIFECYCLE__DRIFT_CHECK_SECS`).
    pub async fn start_demo_with_env(envs: Vec<(&'static str, String)>) -> ControlPlaneProcess {
        let temp = tempfile::tempdir().expect("tempdir");
        let mut control_plane =
            Self::start_with_env(temp.path(), vec!["--demo".to_owned()], envs).await;
        control_plane._temp = Some(temp);
        control_plane
    }

    /// Starts a control plane on `data_dir` with extra arguments.
    pub async fn start_in(data_dir: &Path, args: Vec<String>) -> ControlPlaneProcess {
        Self::start_with_env(data_dir, args, Vec::new()).await
    }

    /// Starts a control plane on `data_dir` with extra arguments and environment variables
    /// (e.g. `TOOLPLANE_CP_STORE_URL`), kept for restarts.
    pub async fn start_with_env(
        data_dir: &Path,
        args: Vec<String>,
        envs: Vec<(&'static str, String)>,
    ) -> ControlPlaneProcess {
        Self::spawn_at(data_dir, "127.0.0.1:0", args, envs).await
    }

    async fn spawn_at(
        data_dir: &Path,
        listen: &str,
        args: Vec<String>,
        envs: Vec<(&'static str, String)>,
    ) -> ControlPlaneProcess {
        let ready = data_dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        let mut full = vec![
            "--listen".to_owned(),
            listen.to_owned(),
            "--data-dir".to_owned(),
            data_dir.display().to_string(),
            "--ready-file".to_owned(),
            ready.display().to_string(),
        ];
        full.extend(args.iter().cloned());
        let log = data_dir.join(format!("control-plane-{}.log", std::process::id()));
        // Purges are signed with the tests' executor key (which the tests' executors accept).
        let mut all_envs = envs.clone();
        if !all_envs
            .iter()
            .any(|(k, _)| *k == "TOOLPLANE_CP_AUTH__EXECUTOR_KEY")
        {
            all_envs.push((
                "TOOLPLANE_CP_AUTH__EXECUTOR_KEY",
                crate::executor_key().0.clone(),
            ));
        }
        // The tests' identity providers listen on loopback.
        if !all_envs
            .iter()
            .any(|(k, _)| *k == "TOOLPLANE_CP_AUTH__PRIVATE_ISSUERS")
        {
            all_envs.push(("TOOLPLANE_CP_AUTH__PRIVATE_ISSUERS", "true".to_owned()));
        }
        let mut process = Process::spawn(&binary("tp-control-plane"), &full, &log, &all_envs);
        let addr = wait_ready(&ready, &mut process).await;
        ControlPlaneProcess {
            process,
            addr,
            data_dir: data_dir.to_path_buf(),
            args,
            envs,
            _temp: None,
        }
    }

    /// Kills (SIGKILL) and starts again on the same data directory (a new port).
    pub async fn kill9_and_restart(&mut self) {
        self.process.kill9().await;
        let restarted =
            Self::start_with_env(&self.data_dir, self.args.clone(), self.envs.clone()).await;
        self.process = restarted.process;
        self.addr = restarted.addr;
    }

    /// Starts again on the same data directory and the same port (after a kill), so that
    /// clients configured with its address find it again.
    pub async fn restart_same_port(&mut self) {
        let restarted = Self::spawn_at(
            &self.data_dir,
            &self.addr,
            self.args.clone(),
            self.envs.clone(),
        )
        .await;
        self.process = restarted.process;
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bootstrap admin token the control plane wrote to its data folder.
    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("admin-token"))
            .expect("admin-token")
            .trim()
            .to_owned()
    }

    /// The fleet's edge token the control plane wrote to its data folder.
    pub fn edge_token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("edge-token"))
            .expect("edge-token")
            .trim()
            .to_owned()
    }

    /// Admin clients.
    pub async fn admin(&self) -> tp_client::Admin {
        tp_client::Admin::connect(&self.url(), &self.admin_token())
            .await
            .expect("admin client")
    }

    /// Clients authenticated with the edge token.
    pub async fn as_edge(&self) -> tp_client::Admin {
        tp_client::Admin::connect(&self.url(), &self.edge_token())
            .await
            .expect("edge client")
    }
}

/// A database of its own on the local PostgreSQL (`TOOLPLANE_TEST_PG`, default
/// `postgres://postgres@127.0.0.1:5432`), dropped (with its connections) on drop.
#[derive(Debug)]
pub struct PgDatabase {
    /// A `postgres://` URL of the database, for the control plane's store.
    pub url: String,
    name: String,
    base: String,
}

impl PgDatabase {
    /// Creates the database; panics (never skips) when PostgreSQL is not reachable.
    pub fn create() -> PgDatabase {
        let base = std::env::var("TOOLPLANE_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let bytes: [u8; 6] = rand::random();
        let name = format!("tp_e2e_{}", hex::encode(bytes));
        let database = PgDatabase {
            url: format!("{base}/{name}"),
            name,
            base,
        };
        database.psql(&format!("CREATE DATABASE {}", database.name));
        database
    }

    fn psql(&self, sql: &str) {
        let output = std::process::Command::new("psql")
            .arg(format!("{}/postgres", self.base))
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("psql is needed (scripts/prereqs.sh installs it): {e}"));
        assert!(
            output.status.success(),
            "psql {sql:?} against {} failed: {}",
            self.base,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .arg(format!("{}/postgres", self.base))
            .args([
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}
