//! The images and the Compose file run for real, with podman.
//!
//! `scripts/containers.sh images` builds the base images from Debian's packages (no registry is
//! reachable here) and the project's four images from `deploy/docker/Dockerfile`, whose runtime
//! stages take the binaries this run's `cargo build` made (`BINARIES=prebuilt`) rather than
//! compiling them a second time. Then `deploy/compose/compose.yaml` runs under podman-compose:
//! PostgreSQL, Redis, two control planes, two edges, haproxy, the wiki and the demo executor.
//! The official Python SDK drives the stack through the balancer, and both edges are stopped
//! and started again, one after the other, under load: no call may fail and no audit record may
//! be lost or stored twice.
//!
//! Two differences from a Docker host, both forced by this machine and podman 4.3:
//! - podman 4.3 runs health checks through systemd, which containers here do not have, so
//!   podman-compose ignores `depends_on: condition: service_healthy`. The test starts the
//!   services in the order those conditions give and waits for each condition itself.
//! - Containers may not raise their open-file limit past 1,024 here, so the balancer's copy of
//!   `haproxy.cfg` has `maxconn 400` instead of 4096 (haproxy needs two descriptors a
//!   connection).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::services::free_port;
use tp_test_support::{eventually, python};

use crate::rolling::{compare, now_ms, settled_trail_of, under_load, until_haproxy_up};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repository root")
}

/// Runs a command to completion; panics with its output when it fails.
fn run(program: &Path, args: &[&str], env: &[(String, String)], dir: &Path) -> Output {
    let output = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?} failed ({}):\n{}\n{}",
        program.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// podman's settings for this machine, as `scripts/containers.sh env` prints them.
fn podman_settings() -> Vec<(String, String)> {
    let out = run(
        Path::new("bash"),
        &["scripts/containers.sh", "env"],
        &[],
        &repo(),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
        .collect()
}

/// The Compose stack of one test, taken down (with its volumes) when dropped.
struct Stack {
    project: String,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    http_port: u16,
    grpc_port: u16,
    admin_token: String,
}

impl Stack {
    /// Builds the images and starts every service of the Compose file.
    async fn up() -> Stack {
        let root = repo();
        let env = podman_settings();
        let began = Instant::now();
        run(
            Path::new("bash"),
            &["scripts/containers.sh", "images"],
            &env,
            &root,
        );
        println!("images built in {:.0} s", began.elapsed().as_secs_f64());
        // The Compose folder, as an operator would copy it: the file itself (build context made
        // absolute), the balancer's configuration (see the module's note on maxconn) and an
        // .env from the example.
        let dir = tempfile::tempdir().unwrap();
        let compose = std::fs::read_to_string(root.join("deploy/compose/compose.yaml")).unwrap();
        assert!(compose.contains("context: ../.."));
        std::fs::write(
            dir.path().join("compose.yaml"),
            compose.replace("context: ../..", &format!("context: {}", root.display())),
        )
        .unwrap();
        let haproxy = std::fs::read_to_string(root.join("deploy/compose/haproxy.cfg")).unwrap();
        assert!(haproxy.contains("maxconn 4096"));
        std::fs::write(
            dir.path().join("haproxy.cfg"),
            haproxy.replace("maxconn 4096", "maxconn 400"),
        )
        .unwrap();
        let (http_port, grpc_port) = (free_port(), free_port());
        let mut dotenv = std::fs::read_to_string(root.join("deploy/compose/.env.example")).unwrap();
        dotenv.push_str(&format!(
            "TOOLPLANE_HTTP_PORT={http_port}\nTOOLPLANE_GRPC_PORT={grpc_port}\n"
        ));
        std::fs::write(dir.path().join(".env"), &dotenv).unwrap();
        let admin_token = dotenv
            .lines()
            .find_map(|l| l.strip_prefix("TOOLPLANE_ADMIN_TOKEN="))
            .unwrap()
            .to_owned();
        let stack = Stack {
            project: format!("tp{}", std::process::id()),
            dir,
            env,
            http_port,
            grpc_port,
            admin_token,
        };
        let began = Instant::now();
        // What `depends_on` conditions say, in order: the database and Redis first...
        stack.compose(&["up", "-d", "--no-deps", "postgres", "redis"]);
        let podman = stack.clone_env();
        let postgres = stack.container("postgres");
        eventually(
            "PostgreSQL accepting connections",
            Duration::from_secs(60),
            || {
                let podman = podman.clone();
                let postgres = postgres.clone();
                async move {
                    let out = Command::new("podman")
                        .args([
                            "exec",
                            &postgres,
                            "pg_isready",
                            "-h",
                            "127.0.0.1",
                            "-U",
                            "toolplane",
                        ])
                        .envs(podman.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                        .output()
                        .ok()?;
                    out.status.success().then_some(())
                }
            },
        )
        .await;
        // ...then the first control plane (it seeds the demo world) and the executors...
        stack.compose(&[
            "up",
            "-d",
            "--no-deps",
            "control-plane-1",
            "wiki",
            "demo-executor",
        ]);
        let url = stack.grpc_url();
        let token = stack.admin_token.clone();
        eventually("control-plane-1 answering", Duration::from_secs(60), || {
            let (url, token) = (url.clone(), token.clone());
            async move {
                let mut admin = tp_client::Admin::connect(&url, &token).await.ok()?;
                admin
                    .tenants
                    .get_tenant(pb::GetTenantRequest { id: "acme".into() })
                    .await
                    .ok()
                    .map(|_| ())
            }
        })
        .await;
        // ...then the second replica, the edges and the balancer.
        stack.compose(&[
            "up",
            "-d",
            "--no-deps",
            "control-plane-2",
            "edge-1",
            "edge-2",
            "edge-lb",
        ]);
        stack.until_answering("control-plane-2").await;
        for edge in ["edge-1", "edge-2"] {
            stack.until_ready(edge).await;
        }
        let readyz = format!("http://127.0.0.1:{}/readyz", stack.http_port);
        eventually("the balancer serving", Duration::from_secs(30), || {
            let readyz = readyz.clone();
            async move {
                let status = reqwest::get(&readyz).await.ok()?.status();
                (status == 200).then_some(())
            }
        })
        .await;
        println!(
            "compose stack of 9 containers up in {:.1} s",
            began.elapsed().as_secs_f64()
        );
        stack
    }

    fn clone_env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    fn compose(&self, args: &[&str]) -> Output {
        let program = python().with_file_name("podman-compose");
        let mut all = vec!["--env-file", ".env", "-p", self.project.as_str()];
        all.extend_from_slice(args);
        run(&program, &all, &self.env, self.dir.path())
    }

    fn podman(&self, args: &[&str]) -> String {
        let out = run(Path::new("podman"), args, &self.env, self.dir.path());
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// podman-compose's name for a service's container.
    fn container(&self, service: &str) -> String {
        format!("{}_{service}_1", self.project)
    }

    fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    fn balancer(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    async fn admin(&self) -> tp_client::Admin {
        tp_client::Admin::connect(&self.grpc_url(), &self.admin_token)
            .await
            .expect("admin client")
    }

    /// A container's address on the Compose network (the host reaches rootful podman's bridge).
    fn address(&self, service: &str) -> String {
        self.podman(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &self.container(service),
        ])
    }

    /// Waits until a control plane's container answers an admin call on its own address: the
    /// edges' readiness says only that one of the two replicas does.
    async fn until_answering(&self, service: &str) {
        let url = format!("http://{}:50051", self.address(service));
        let token = self.admin_token.clone();
        let answered = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                if let Ok(mut admin) = tp_client::Admin::connect(&url, &token).await
                    && admin
                        .tenants
                        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
                        .await
                        .is_ok()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        assert!(
            answered.is_ok(),
            "{service} not answering at {url} after 60 s:\n{}",
            self.state_of(service)
        );
    }

    /// A container's state, restart count and last log lines, for a failure's message.
    fn state_of(&self, service: &str) -> String {
        let container = self.container(service);
        let inspect = Command::new("podman")
            .args([
                "inspect",
                "-f",
                "status {{.State.Status}}, exit code {{.State.ExitCode}}, restarts {{.RestartCount}}, started {{.State.StartedAt}}, finished {{.State.FinishedAt}}",
                &container,
            ])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
        let logs = Command::new("podman")
            .args(["logs", "--tail", "40", &container])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
        let text = |o: std::io::Result<Output>| match o {
            Ok(o) => format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => e.to_string(),
        };
        format!("{container}: {}\n{}", text(inspect).trim(), text(logs))
    }

    /// Waits until an edge container answers /readyz 200 on its own address, then until the
    /// balancer has it UP again (its stats page): only then may the other edge stop.
    async fn until_ready(&self, service: &str) {
        let ip = self.address(service);
        let url = format!("http://{ip}:8080/readyz");
        eventually(
            &format!("{service} ready at {url}"),
            Duration::from_secs(60),
            || {
                let url = url.clone();
                async move {
                    let status = reqwest::get(&url).await.ok()?.status();
                    (status == 200).then_some(())
                }
            },
        )
        .await;
        let stats = format!("http://{}:8404/stats;csv", self.address("edge-lb"));
        until_haproxy_up(&stats, service, Duration::from_secs(60)).await;
    }

    /// Issues an API key the way the Compose file's header says: `toolplanectl` inside the
    /// control plane's container.
    fn issue_key(&self, tenant: &str, role: &str) -> String {
        self.issue_key_on("control-plane-1", tenant, role)
    }

    fn issue_key_on(&self, service: &str, tenant: &str, role: &str) -> String {
        let args = [
            "exec",
            &self.container(service),
            "toolplanectl",
            "--token",
            &self.admin_token,
            "--json",
            "keys",
            "issue",
            "--tenant",
            tenant,
            "--role",
            role,
        ];
        let output = Command::new("podman")
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(self.dir.path())
            .output()
            .expect("podman");
        assert!(
            output.status.success(),
            "podman {args:?} failed ({}):\n{}\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.state_of(service)
        );
        let out = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let issued: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
        issued["key"].as_str().expect("key").to_owned()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let program = python().with_file_name("podman-compose");
        let _ = Command::new(program)
            .args([
                "--env-file",
                ".env",
                "-p",
                &self.project,
                "down",
                "-v",
                "-t",
                "10",
            ])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(self.dir.path())
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_compose_file_runs_in_podman_and_the_python_sdk_uses_it_through_the_balancer() {
    let stack = Stack::up().await;
    let mut admin = stack.admin().await;

    // The official Python SDK through haproxy, in both lifecycles: the whole registry of acme's
    // collectors, a call served by the demo executor's container and two by the wiki's.
    let acme = stack.issue_key("acme", "collector");
    let expected = crate::fleet::listing_of(&mut admin, "acme", "collector").await;
    let script = std::fs::canonicalize("clients/python_client.py").expect("python_client.py");
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let calls = json!([
            ["gmail", {"query": "from:cfo"}],
            ["client_wiki", {"action": "ingest", "source": {"type": "text",
                "text": format!("Acme Corp opened an office in Lisbon in 2024 ({mode})."),
                "source_label": format!("Lisbon office {mode}")}}],
            ["client_wiki", {"action": "query", "question": "Where did Acme Corp open an office?"}],
        ]);
        let out = crate::clients::run_client(
            &python(),
            &[
                script.display().to_string(),
                format!("http://{}/mcp", stack.balancer()),
                acme.clone(),
                mode.to_owned(),
                calls.to_string(),
            ],
            Path::new("."),
        )
        .await;
        assert_eq!(out["protocol_version"], version, "{mode}: {out}");
        assert_eq!(out["tools"], json!(expected), "{mode}: the whole registry");
        for (i, call) in out["calls"].as_array().unwrap().iter().enumerate() {
            assert_eq!(call["is_error"], false, "{mode}: call {i}: {call}");
        }
        let answer = out["calls"][2]["text"].as_str().unwrap_or_default();
        assert!(answer.contains("Lisbon"), "{mode}: {answer}");
    }

    // Both edges stopped (SIGTERM, as `podman stop` sends) and started again, one after the
    // other, while four keep-alive clients call through the balancer.
    let globex = stack.issue_key("globex", "collector");
    let since = now_ms();
    let mut stops = Vec::new();
    let restarts = async {
        for edge in ["edge-1", "edge-2"] {
            let began = Instant::now();
            stack.podman(&["stop", "-t", "45", &stack.container(edge)]);
            let exit = stack.podman(&[
                "inspect",
                "-f",
                "{{.State.ExitCode}}",
                &stack.container(edge),
            ]);
            stops.push((edge, began.elapsed(), exit));
            stack.podman(&["start", &stack.container(edge)]);
            stack.until_ready(edge).await;
        }
    };
    let ledger = under_load(
        &stack.balancer(),
        &globex,
        ("gmail", "query"),
        "ctr",
        restarts,
    )
    .await;
    for (edge, took, exit) in &stops {
        assert_eq!(exit, "0", "{edge} did not stop cleanly");
        assert!(
            *took >= Duration::from_secs(5),
            "{edge} stopped before its 5 s grace period ended ({took:?})"
        );
    }
    let failed = ledger.failed();
    let seen = ledger.succeeded();
    let trail = settled_trail_of(&mut admin, "globex", since).await;
    let (lost, duplicated, extra) = compare(&seen, &trail, "ctr");
    println!(
        "containers: both edges restarted in turn behind haproxy ({}): {} calls, {} failed, {} audit records lost, {} duplicated",
        stops
            .iter()
            .map(|(e, t, _)| format!("{e} stopped in {:.1} s", t.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        seen.len() + failed.len(),
        failed.len(),
        lost.len(),
        duplicated.len()
    );
    assert!(seen.len() > 100, "too few calls: {}", seen.len());
    assert!(
        failed.is_empty(),
        "failed calls: {:#?}",
        &failed[..failed.len().min(10)]
    );
    assert!(lost.is_empty(), "lost: {:?}", &lost[..lost.len().min(10)]);
    assert!(duplicated.is_empty(), "stored twice: {duplicated:?}");
    assert!(
        extra.is_empty(),
        "records of calls never answered: {extra:?}"
    );

    // control-plane-1 killed (stop -t 0: SIGKILL at once, and no restart): the edges follow control-plane-2, which serves the same store.
    // A key it issues (through its own container) works through the balancer.
    // control-plane-2 has been up since the start, under the edges' watch streams, and must
    // still be: a replica that crashed and came back would pass the call below by luck.
    stack.until_answering("control-plane-2").await;
    let state = stack.state_of("control-plane-2");
    assert!(state.contains("restarts 0,"), "{state}");
    stack.podman(&["stop", "-t", "0", &stack.container("control-plane-1")]);
    let late = stack.issue_key_on("control-plane-2", "globex", "collector");
    let client =
        tp_test_support::McpHttp::new(&stack.balancer(), Some(late.as_str()), crate::fleet::LEGACY);
    let call = eventually(
        "a key issued by control-plane-2 accepted",
        Duration::from_secs(30),
        || {
            let client = &client;
            async move {
                let call = client.call("gmail", json!({"query": "x"})).await;
                (call.result()["isError"] == false).then_some(call)
            }
        },
    )
    .await;
    assert!(call.body.contains("gmail"), "{}", call.body);
    println!(
        "control-plane-1 killed: a key issued by control-plane-2 was served through the balancer"
    );
}

/// The chart's rendered objects, in a podman of this machine, in a network namespace of the
/// test's own, removed when dropped.
struct KubePlay {
    release: String,
    netns: String,
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

impl KubePlay {
    /// `podman …` inside the namespace (only its network: the host's cgroups stay visible).
    fn podman(&self, args: &[&str]) -> String {
        let netns = format!("--net=/run/netns/{}", self.netns);
        let mut all = vec![netns.as_str(), "podman"];
        all.extend_from_slice(args);
        let out = run(Path::new("nsenter"), &all, &self.env, self.dir.path());
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `podman kube play` of some of the chart's documents, the pod reachable under the name
    /// of the Service in front of it (what a cluster's DNS gives; podman 4.3 plays no Service).
    fn play(&self, name: &str, documents: &[&serde_yaml_ng::Value], alias: Option<&str>) {
        let file = self.dir.path().join(format!("{name}.yaml"));
        let text: Vec<String> = documents
            .iter()
            .map(|d| serde_yaml_ng::to_string(d).unwrap())
            .collect();
        std::fs::write(&file, text.join("---\n")).unwrap();
        let network = match alias {
            Some(alias) => format!("{}:alias={alias}", self.release),
            None => self.release.clone(),
        };
        self.podman(&[
            "kube",
            "play",
            "--network",
            &network,
            file.to_str().unwrap(),
        ]);
    }

    /// The chart's Secret as a podman secret, in the form podman 4.3 reads it: for environment
    /// variables (`secretKeyRef`) a JSON map of base64 values; for volumes a whole Secret whose
    /// `data` holds the values as they are (podman writes them to the files undecoded).
    fn secret(&self, secret: &serde_yaml_ng::Value, for_volumes: bool) {
        use base64::Engine as _;
        let name = secret["metadata"]["name"].as_str().unwrap();
        let data: serde_json::Map<String, Value> = secret["stringData"]
            .as_mapping()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let value = v.as_str().unwrap();
                let value = if for_volumes {
                    value.to_owned()
                } else {
                    base64::engine::general_purpose::STANDARD.encode(value)
                };
                (k.as_str().unwrap().to_owned(), Value::from(value))
            })
            .collect();
        let content = if for_volumes {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data})
        } else {
            Value::Object(data)
        };
        let file = self.dir.path().join("secret.json");
        std::fs::write(&file, content.to_string()).unwrap();
        let _ = Command::new("podman")
            .args(["secret", "rm", name])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
        self.podman(&["secret", "create", name, file.to_str().unwrap()]);
    }

    /// GET inside the namespace (the pods' ports are published there, not on the host).
    fn get(&self, url: &str) -> String {
        let netns = format!("--net=/run/netns/{}", self.netns);
        let out = Command::new("nsenter")
            .args([netns.as_str(), "curl", "-s", "-m", "5", url])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for KubePlay {
    fn drop(&mut self) {
        let podman = |args: &[&str]| {
            let _ = Command::new("podman")
                .args(args)
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .output();
        };
        let pods = Command::new("podman")
            .args(["pod", "ls", "--format", "{{.Name}}"])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for pod in pods.lines().filter(|p| p.starts_with(&self.release)) {
            podman(&["pod", "rm", "-f", "-t", "2", pod]);
        }
        let volumes = Command::new("podman")
            .args(["volume", "ls", "--format", "{{.Name}}"])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for volume in volumes.lines().filter(|v| v.starts_with(&self.release)) {
            podman(&["volume", "rm", "-f", volume]);
        }
        podman(&["secret", "rm", &format!("{}-toolplane-auth", self.release)]);
        podman(&["network", "rm", "-f", &self.release]);
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}

/// The Helm chart's Deployments as podman runs them (`podman kube play`), as far as podman 4.3
/// goes: the control plane (seeding the demo world), Redis, the edge, the demo executor and the
/// wiki start from the rendered manifests unchanged, and the official Python SDK lists and calls
/// through the edge. What podman 4.3 cannot do, and the test does for it: it plays no Service
/// (each pod gets its Service's name on the network instead), it publishes every containerPort
/// on the host's addresses (the pods run in a network namespace of the test's own), it reads a
/// Secret in one form for environment variables and another for volumes (the test writes the
/// podman secret in each form before the pods that need it), it crashes on a secret volume that
/// does not say `optional` (the chart says `optional: false`, the cluster's default), and HPA,
/// PDB and NetworkPolicy objects are not played.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_charts_deployments_run_in_podman_and_the_python_sdk_uses_the_edge() {
    let root = repo();
    let env = podman_settings();
    run(
        Path::new("bash"),
        &["scripts/containers.sh", "images"],
        &env,
        &root,
    );
    let release = format!("tk{}", std::process::id());
    let chart = root.join("deploy/helm/toolplane");
    let key = format!("auth.executorKey=tpx_{}", "cd".repeat(32));
    let (ok, manifests, stderr) = crate::deploy::helm(&[
        "template",
        &release,
        chart.to_str().unwrap(),
        "--set",
        "auth.adminToken=admin-token-0123456789",
        "--set",
        "auth.edgeToken=edge-token-0123456789",
        "--set",
        &key,
        "--set",
        "controlPlane.demo=true",
        "--set",
        "demoExecutor.enabled=true",
        // The client reaches the edge's published port, as through `kubectl port-forward`.
        "--set",
        "edge.allowedHosts[0]=127.0.0.1",
    ]);
    assert!(ok, "helm template: {stderr}");
    let documents: Vec<serde_yaml_ng::Value> = manifests
        .split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).ok())
        .filter(serde_yaml_ng::Value::is_mapping)
        .collect();
    let of_kind = |kind: &str| -> Vec<&serde_yaml_ng::Value> {
        documents.iter().filter(|d| d["kind"] == kind).collect()
    };
    let deployment = |component: &str| -> &serde_yaml_ng::Value {
        let name = format!("{release}-toolplane-{component}");
        of_kind("Deployment")
            .into_iter()
            .find(|d| d["metadata"]["name"].as_str() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no Deployment {name}"))
    };
    let secret = of_kind("Secret")[0];
    let config_maps = of_kind("ConfigMap");
    let netns = release.clone();
    run(Path::new("ip"), &["netns", "add", &netns], &[], &root);
    let play = KubePlay {
        release: release.clone(),
        netns: netns.clone(),
        env,
        dir: tempfile::tempdir().unwrap(),
    };
    run(
        Path::new("ip"),
        &["netns", "exec", &netns, "ip", "link", "set", "lo", "up"],
        &[],
        &root,
    );
    play.podman(&["network", "create", &release]);
    let claims = of_kind("PersistentVolumeClaim");
    play.play("claims", &claims, None);
    play.secret(secret, false);
    let with_config = |component: &str| -> Vec<&serde_yaml_ng::Value> {
        let mut docs = config_maps.clone();
        docs.push(deployment(component));
        docs
    };
    let began = Instant::now();
    for component in ["control-plane", "redis", "edge"] {
        let name = format!("{release}-toolplane-{component}");
        play.play(component, &with_config(component), Some(&name));
    }
    play.secret(secret, true);
    for component in ["demo-executor", "wiki"] {
        let name = format!("{release}-toolplane-{component}");
        play.play(component, &with_config(component), Some(&name));
    }
    let readyz = eventually("the edge ready", Duration::from_secs(60), || {
        let body = play.get("http://127.0.0.1:8080/readyz");
        async move { body.contains("\"ready\":true").then_some(body) }
    })
    .await;
    assert!(readyz.contains("\"redis\":\"up\""), "{readyz}");
    println!(
        "chart: five Deployments running in {:.1} s; edge: {readyz}",
        began.elapsed().as_secs_f64()
    );

    // A key from toolplanectl in the control plane's pod; the Python SDK in the namespace.
    let cp = format!("{release}-toolplane-control-plane-pod-0-control-plane");
    let issued = play.podman(&[
        "exec",
        &cp,
        "toolplanectl",
        "--token",
        "admin-token-0123456789",
        "--json",
        "keys",
        "issue",
        "--tenant",
        "acme",
        "--role",
        "collector",
    ]);
    let issued: Value = serde_json::from_str(&issued).unwrap_or_else(|e| panic!("{issued}: {e}"));
    let script = std::fs::canonicalize("clients/python_client.py").expect("python_client.py");
    let calls = json!([
        ["gmail", {"query": "from:cfo"}],
        ["client_wiki", {"action": "ingest", "source": {"type": "text",
            "text": "Acme Corp opened an office in Porto in 2025.", "source_label": "Porto office"}}],
        ["client_wiki", {"action": "query", "question": "Where did Acme Corp open an office?"}],
    ]);
    let python = python();
    let netns_arg = format!("--net=/run/netns/{netns}");
    let out = crate::clients::run_client(
        Path::new("nsenter"),
        &[
            netns_arg,
            python.display().to_string(),
            script.display().to_string(),
            "http://127.0.0.1:8080/mcp".to_owned(),
            issued["key"].as_str().unwrap().to_owned(),
            "auto".to_owned(),
            calls.to_string(),
        ],
        Path::new("."),
    )
    .await;
    assert_eq!(out["protocol_version"], "2026-07-28", "{out}");
    assert!(
        out["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 10 && t.contains(&json!("client_wiki"))),
        "{out}"
    );
    for (i, call) in out["calls"].as_array().unwrap().iter().enumerate() {
        assert_eq!(call["is_error"], false, "call {i}: {call}");
    }
    assert!(
        out["calls"][2]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Porto")),
        "{out}"
    );
    println!(
        "chart in podman: the Python SDK listed {} tools and called gmail (demo executor) and client_wiki (wiki) through the edge",
        out["tools"].as_array().unwrap().len()
    );
}
