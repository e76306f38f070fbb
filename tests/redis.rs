//! The fleet's shared state beyond one plain Redis server, against real `redis-server`s the
//! tests start: over TLS with a private CA and client certificates (`rediss://`), and on a
//! Redis Cluster of three primaries and three replicas made with `redis-cli --cluster create`,
//! through which two edges share their cache, their rate limits and their messages (a
//! cancellation crossing edges) — also while a primary is killed under load and its replica
//! takes over; and behind Redis Sentinel, whose primary is killed under load while the edges
//! know only the sentinels. The figures (calls, failed calls, Redis errors, failover time) are
//! printed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tp_proto::pb;
use tp_test_support::process::Process;
use tp_test_support::services::{free_port, which};
use tp_test_support::{
    ControlPlaneProcess, EdgeProcess, McpHttp, RedisProcess, StallProxy, eventually,
};

use crate::fleet::{Fleet, LEGACY};
use crate::tls::Pki;
use crate::trust_edge::testing_tenant;

fn redis_server(dir: &Path, port: u16, extra: &[String]) -> Process {
    let program = which("redis-server").expect("redis-server (scripts/prereqs.sh installs it)");
    let mut args: Vec<String> = [
        "--bind",
        "127.0.0.1",
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
    args.extend_from_slice(extra);
    if !extra.iter().any(|a| a == "--port") {
        args.extend(["--port".to_owned(), port.to_string()]);
    }
    Process::spawn(&program, &args, &dir.join(format!("redis-{port}.log")), &[])
}

/// `redis-cli ARGS`: (success, stdout).
fn cli(args: &[String]) -> (bool, String) {
    let out = std::process::Command::new(which("redis-cli").expect("redis-cli"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Sets `tenant`'s rate limit.
async fn limit(fleet: &Fleet, tenant: &str, per_minute: u32) {
    let mut admin = fleet.cp.admin().await;
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::changing(
            pb::Tenant {
                id: tenant.into(),
                rate_limit_per_minute: per_minute,
                ..Default::default()
            },
            &["rate_limit_per_minute"],
        ))
        .await
        .unwrap();
}

/// Waits past the end of the current minute if it is less than 5 s away. Rate limits count
/// per calendar minute (the edges share this machine's clock): calls that straddled a minute's
/// end would be counted in two windows, and up to twice the limit served.
pub(crate) async fn clear_of_a_minute_end() {
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
        % 60_000;
    if into_minute > 55_000 {
        let left = u64::try_from(60_500 - into_minute).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(left)).await;
    }
}

/// `calls` calls of `echo` through each edge: how many were served on each (the others must
/// be refused as rate-limited).
async fn metered(edges: &[&EdgeProcess], key: &str, calls: usize) -> Vec<usize> {
    clear_of_a_minute_end().await;
    let mut served = Vec::new();
    for edge in edges {
        let client = McpHttp::new(&edge.addr, Some(key), LEGACY);
        let mut ok = 0;
        for _ in 0..calls {
            let reply = client.call("echo", json!({"text": "x"})).await;
            if reply.status == 200 && reply.error().is_null() {
                ok += 1;
            } else {
                assert_eq!(reply.error()["code"], -32029, "{}", reply.body);
            }
        }
        served.push(ok);
    }
    served
}

/// What each edge's metrics and log say about Redis and rate limits: the message of a failed
/// count of served calls (was the limit known, did Redis answer, what fleet size was assumed).
async fn limits_seen(edges: &[&EdgeProcess]) -> String {
    let mut seen = String::new();
    for (i, edge) in edges.iter().enumerate() {
        let metrics = edge.admin_get("/metrics").await.1;
        seen.push_str(&format!("\nedge {i}:\n"));
        for line in metrics.lines().filter(|l| {
            ["tp_edge_rate_limit", "tp_edge_redis_", "tp_edge_fleet_size"]
                .iter()
                .any(|name| l.starts_with(name))
        }) {
            seen.push_str(&format!("  {line}\n"));
        }
        let log = edge.process.log_text();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        for line in tail.iter().rev() {
            seen.push_str(&format!("  | {line}\n"));
        }
    }
    seen
}

async fn redis_state(edge: &EdgeProcess) -> String {
    let (_, body) = edge.get("/readyz").await;
    let ready: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    ready["redis"].as_str().unwrap_or_default().to_owned()
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn two_edges_share_rate_limits_over_tls_to_redis_with_client_certificates() {
    let pki = Pki::new();
    let (server_cert, server_key) = pki.leaf("redis", true);
    let (client_cert, client_key) = pki.leaf("edge", false);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _redis = redis_server(
        dir.path(),
        port,
        &[
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            server_cert.display().to_string(),
            "--tls-key-file".into(),
            server_key.display().to_string(),
            "--tls-ca-cert-file".into(),
            pki.ca().display().to_string(),
            "--tls-auth-clients".into(),
            "yes".into(),
        ],
    );
    let tls_cli = |command: &[&str]| {
        let mut args: Vec<String> = [
            "--tls",
            "--cacert",
            &pki.ca().display().to_string(),
            "--cert",
            &client_cert.display().to_string(),
            "--key",
            &client_key.display().to_string(),
            "-p",
            &port.to_string(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(command.iter().map(|s| (*s).to_owned()));
        cli(&args)
    };
    eventually("redis over TLS", Duration::from_secs(10), || async {
        tls_cli(&["ping"]).1.contains("PONG").then_some(())
    })
    .await;

    let fleet = Fleet::start(0, "").await;
    let key = testing_tenant(&fleet, "metered").await;
    limit(&fleet, "metered", 10).await;
    let url = format!("rediss://127.0.0.1:{port}");
    let with_certificate = format!(
        "[cache]\nredis_ca_file = {:?}\nredis_cert_file = {:?}\nredis_key_file = {:?}\n",
        pki.ca().display().to_string(),
        client_cert.display().to_string(),
        client_key.display().to_string()
    );
    let mut edges = Vec::new();
    for _ in 0..2 {
        edges.push(
            EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&url), &with_certificate).await,
        );
    }
    for edge in &edges {
        eventually("the edge on TLS Redis", Duration::from_secs(10), || async {
            (redis_state(edge).await == "up").then_some(())
        })
        .await;
    }
    // The fleet-wide limit: 10 a minute in all, whichever edge serves.
    let served = metered(&[&edges[0], &edges[1]], &key, 8).await;
    assert_eq!(
        served.iter().sum::<usize>(),
        10,
        "served per edge: {served:?}"
    );
    let (_, size) = tls_cli(&["dbsize"]);
    assert!(
        size.trim().parse::<u64>().unwrap_or(0) > 0,
        "nothing cached in Redis: {size}"
    );
    // Without a client certificate the server refuses the edge: it says Redis is down and
    // still serves (from the control plane), and its log names the failure.
    let without = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&url),
        &format!(
            "[cache]\nredis_ca_file = {:?}\n",
            pki.ca().display().to_string()
        ),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(redis_state(&without).await, "down");
    let other = testing_tenant(&fleet, "unmetered").await;
    let reply = McpHttp::new(&without.addr, Some(&other), LEGACY)
        .call("echo", json!({"text": "still served"}))
        .await;
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    assert!(
        without.log().contains("redis unreachable"),
        "{}",
        without.log()
    );
    println!(
        "TLS Redis with client certificates: two edges served {served:?} of 8 + 8 calls under a 10/min limit; an edge without a certificate refused by Redis and still serving"
    );
}

/// Six `redis-server`s in cluster mode, made a cluster of three primaries with a replica each.
struct Cluster {
    nodes: Vec<(u16, Option<Process>)>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let port = free_port();
            let node_dir = dir.path().join(port.to_string());
            std::fs::create_dir_all(&node_dir).unwrap();
            let process = redis_server(
                &node_dir,
                port,
                &[
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-config-file".into(),
                    "nodes.conf".into(),
                    "--cluster-node-timeout".into(),
                    "1000".into(),
                    // The bus on a port of its own (port + 10000 may not exist).
                    "--cluster-port".into(),
                    free_port().to_string(),
                    // Replicas sync at once (not after the default 5 s wait for others), and
                    // may take over however long ago they last heard their primary.
                    "--repl-diskless-sync-delay".into(),
                    "0".into(),
                    "--cluster-replica-validity-factor".into(),
                    "0".into(),
                ],
            );
            nodes.push((port, Some(process)));
        }
        for (port, _) in &nodes {
            let port = *port;
            eventually("a cluster node", Duration::from_secs(10), || async move {
                cli(&["-p".into(), port.to_string(), "ping".into()])
                    .1
                    .contains("PONG")
                    .then_some(())
            })
            .await;
        }
        let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
        create.extend(nodes.iter().map(|(p, _)| format!("127.0.0.1:{p}")));
        create.extend([
            "--cluster-replicas".into(),
            "1".into(),
            "--cluster-yes".into(),
        ]);
        let (ok, out) = cli(&create);
        assert!(ok, "redis-cli --cluster create: {out}");
        let cluster = Cluster { nodes, _dir: dir };
        cluster.until_ok().await;
        // Every replica has its primary's data (else it could not take over).
        for (port, _) in &cluster.nodes {
            let port = *port;
            eventually("replicas in sync", Duration::from_secs(30), || async move {
                let (_, info) = cli(&[
                    "-p".into(),
                    port.to_string(),
                    "info".into(),
                    "replication".into(),
                ]);
                (info.contains("role:master") || info.contains("master_link_status:up"))
                    .then_some(())
            })
            .await;
        }
        cluster
    }

    /// Waits until every live node says `cluster_state:ok`.
    async fn until_ok(&self) {
        for (port, process) in &self.nodes {
            if process.is_none() {
                continue;
            }
            let port = *port;
            eventually("cluster_state:ok", Duration::from_secs(30), || async move {
                cli(&[
                    "-p".into(),
                    port.to_string(),
                    "cluster".into(),
                    "info".into(),
                ])
                .1
                .contains("cluster_state:ok")
                .then_some(())
            })
            .await;
        }
    }

    /// The ports of the primaries, as the cluster sees them now.
    fn primaries(&self) -> Vec<u16> {
        let live = self.nodes.iter().find(|(_, p)| p.is_some()).unwrap().0;
        let (_, nodes) = cli(&[
            "-p".into(),
            live.to_string(),
            "cluster".into(),
            "nodes".into(),
        ]);
        nodes
            .lines()
            .filter(|l| l.contains("master") && !l.contains("fail"))
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|addr| addr.split('@').next()?.rsplit(':').next()?.parse().ok())
            .collect()
    }

    fn seeds(&self) -> String {
        self.nodes
            .iter()
            .take(3)
            .map(|(p, _)| format!("redis://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    async fn kill9(&mut self, port: u16) {
        let node = self.nodes.iter_mut().find(|(p, _)| *p == port).unwrap();
        if let Some(mut process) = node.1.take() {
            process.kill9().await;
        }
    }
}

/// Four clients of `qa` (two per edge) listing and calling `echo` until [`Load::finish`]:
/// listing goes through the caches, calls through the rate limits (in Redis).
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(fleet: &Fleet, edges: &[EdgeProcess]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut workers = Vec::new();
        for (i, role) in ["collector", "executor", "collector", "executor"]
            .into_iter()
            .enumerate()
        {
            let client = McpHttp::new(&edges[i % 2].addr, Some(fleet.key("qa", role)), LEGACY);
            let (stop, ok, failed) = (Arc::clone(&stop), Arc::clone(&ok), Arc::clone(&failed));
            workers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let listed = client.request(1, "tools/list", json!({})).await;
                    let called = client.call("echo", json!({"text": "x"})).await;
                    if listed.status == 200 && called.status == 200 && called.error().is_null() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        Load {
            stop,
            ok,
            failed,
            workers,
        }
    }

    /// Stops the clients: (rounds that succeeded, rounds that failed).
    async fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers {
            worker.await.unwrap();
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_cluster_carries_cache_limits_and_messages_through_a_primary_failover() {
    let mut cluster = Cluster::start().await;
    let fleet = Fleet::start(0, "").await;
    let extra = "[cache]\nredis_cluster = true\n";
    let mut edges = Vec::new();
    for _ in 0..2 {
        edges.push(
            EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&cluster.seeds()), extra).await,
        );
    }
    for edge in &edges {
        eventually(
            "the edge on the cluster",
            Duration::from_secs(10),
            || async { (redis_state(edge).await == "up").then_some(()) },
        )
        .await;
    }
    // Rate limits across the fleet, counted in the cluster.
    let key = testing_tenant(&fleet, "metered").await;
    limit(&fleet, "metered", 10).await;
    let served = metered(&[&edges[0], &edges[1]], &key, 8).await;
    assert_eq!(
        served.iter().sum::<usize>(),
        10,
        "served per edge: {served:?}"
    );
    // The cache is spread over the shards.
    let keys: Vec<u64> = cluster
        .primaries()
        .iter()
        .map(|p| {
            cli(&["-p".into(), p.to_string(), "dbsize".into()])
                .1
                .trim()
                .parse()
                .unwrap_or(0)
        })
        .collect();
    assert!(keys.iter().sum::<u64>() > 0, "{keys:?}");
    // A key revoked leaves the cluster: its shared identity deleted on whichever shard held
    // it, and the key refused on both edges.
    let identities = |cluster: &Cluster| -> usize {
        cluster
            .primaries()
            .iter()
            .map(|port| {
                let (_, keys) = cli(&[
                    "-p".into(),
                    port.to_string(),
                    "--scan".into(),
                    "--pattern".into(),
                    "*:id:*".into(),
                ]);
                keys.lines().filter(|line| !line.trim().is_empty()).count()
            })
            .sum()
    };
    let mut admin = fleet.cp.admin().await;
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "qa".into(),
            role: "collector".into(),
            label: "revoked in the cluster".into(),
            ttl_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let before = identities(&cluster);
    for edge in &edges {
        let reply = McpHttp::new(&edge.addr, Some(&issued.key), LEGACY)
            .request(1, "tools/list", json!({}))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    eventually(
        "its identity in the cluster",
        Duration::from_secs(10),
        || async { (identities(&cluster) == before + 1).then_some(()) },
    )
    .await;
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: issued.info.unwrap().id,
        })
        .await
        .unwrap();
    eventually(
        "its identity gone from the cluster",
        Duration::from_secs(10),
        || async { (identities(&cluster) == before).then_some(()) },
    )
    .await;
    for edge in &edges {
        let reply = McpHttp::new(&edge.addr, Some(&issued.key), LEGACY)
            .request(1, "tools/list", json!({}))
            .await;
        assert_eq!(reply.status, 401, "{}", reply.body);
    }
    // A message crosses edges through the cluster: a call on edge 0 cancelled on edge 1.
    let sleeper = fleet.key("qa", "collector").to_owned();
    let call = tokio::spawn({
        let addr = edges[0].addr.clone();
        let key = sleeper.clone();
        async move {
            McpHttp::new(&addr, Some(&key), "2026-07-28")
                .request(
                    77,
                    "tools/call",
                    json!({"name": "sleep", "arguments": {"ms": 8000}}),
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let cancel = McpHttp::new(&edges[1].addr, Some(&sleeper), "2026-07-28")
        .raw(
            serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 77, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .unwrap(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "notifications/cancelled"),
                ("authorization", &format!("Bearer {sleeper}")),
            ],
        )
        .await;
    assert_eq!(cancel.status, 202, "{}", cancel.body);
    let answered = call.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "not cancelled across edges: {}",
        answered.body
    );

    // A primary killed under load: calls go on (Redis failures never fail a request), the
    // replica takes over, and the edges use the cluster again.
    let victim = cluster.primaries()[0];
    let before: Vec<f64> = {
        let mut v = Vec::new();
        for edge in &edges {
            v.push(metric(
                &edge.admin_get("/metrics").await.1,
                "tp_edge_redis_errors_total",
            ));
        }
        v
    };
    // A limit high enough never to refuse, so that every call counts in the cluster.
    limit(&fleet, "qa", 1_000_000).await;
    let load = Load::start(&fleet, &edges);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let killed = Instant::now();
    cluster.kill9(victim).await;
    // Failed over: the victim marked failed, three primaries again (a replica promoted), and
    // every live node says the cluster is ok.
    eventually("a replica promoted", Duration::from_secs(30), || async {
        let primaries = cluster.primaries();
        (primaries.len() == 3 && !primaries.contains(&victim)).then_some(())
    })
    .await;
    cluster.until_ok().await;
    let failover = killed.elapsed();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let (ok, failed) = load.finish().await;
    let mut errors = Vec::new();
    for (edge, before) in edges.iter().zip(&before) {
        errors.push(
            metric(
                &edge.admin_get("/metrics").await.1,
                "tp_edge_redis_errors_total",
            ) - before,
        );
    }
    println!(
        "Redis Cluster (3 primaries + 3 replicas): primary :{victim} killed under load; cluster ok again after {failover:?}; {ok} list+call rounds ok, {failed} failed; Redis errors seen by the edges: {errors:?}"
    );
    assert_eq!(failed, 0, "requests failed because a Redis node died");
    assert!(ok > 20, "too little load to mean anything: {ok}");
    // Back on the cluster: the edges' commands succeed again (no new Redis error for a
    // second), and the limits count there again.
    let mut last = f64::MAX;
    let mut quiet_since = Instant::now();
    let recovering = Instant::now();
    loop {
        let mut now = 0.0;
        for edge in &edges {
            now += metric(
                &edge.admin_get("/metrics").await.1,
                "tp_edge_redis_errors_total",
            );
            // One command each, so that an edge with nothing to do also finds out.
            let _ = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY)
                .call("echo", json!({"text": "probe"}))
                .await;
        }
        if now != last {
            quiet_since = Instant::now();
            last = now;
        }
        if quiet_since.elapsed() >= Duration::from_secs(1) {
            break;
        }
        // (A connection left to find the new primary by itself took up to 22 s here; rebuilt
        // from the seeds after failures, about 0.15 s.)
        assert!(
            recovering.elapsed() < Duration::from_secs(10),
            "the edges still fail Redis commands 10 s after the failover ({now} errors)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "edges back on the cluster {:?} after the failover completed",
        recovering.elapsed().saturating_sub(Duration::from_secs(1))
    );
    for edge in &edges {
        assert_eq!(redis_state(edge).await, "up");
    }
    let key = testing_tenant(&fleet, "metered-after").await;
    limit(&fleet, "metered-after", 10).await;
    let served = metered(&[&edges[0], &edges[1]], &key, 8).await;
    assert_eq!(
        served.iter().sum::<usize>(),
        10,
        "after the failover: {served:?}{}",
        limits_seen(&[&edges[0], &edges[1]]).await
    );
}

/// A primary, its replica and three sentinels (quorum 2), all on loopback; two edges that know
/// only the sentinels. The primary is killed under load: no request fails, the sentinels
/// promote the replica, and the edges follow it (Redis up again, errors stop, rate limits
/// counted there).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_edges_follow_a_sentinel_failover_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_port, replica_port) = (free_port(), free_port());
    let quick_sync = ["--repl-diskless-sync-delay".to_owned(), "0".to_owned()];
    let mut primary = redis_server(dir.path(), primary_port, &quick_sync);
    let mut replica_args = quick_sync.to_vec();
    replica_args.extend([
        "--replicaof".to_owned(),
        "127.0.0.1".to_owned(),
        primary_port.to_string(),
    ]);
    let _replica = redis_server(dir.path(), replica_port, &replica_args);
    for port in [primary_port, replica_port] {
        tp_test_support::services::wait_for_port(port, "redis-server").await;
    }
    eventually("the replica in sync", Duration::from_secs(20), || async {
        let (_, info) = cli(&[
            "-p".into(),
            replica_port.to_string(),
            "info".into(),
            "replication".into(),
        ]);
        info.contains("master_link_status:up").then_some(())
    })
    .await;
    let program = which("redis-server").unwrap();
    let mut sentinels = Vec::new();
    let mut urls = Vec::new();
    for i in 0..3 {
        let port = free_port();
        let conf = dir.path().join(format!("sentinel-{i}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor tp 127.0.0.1 {primary_port} 2\nsentinel down-after-milliseconds tp 1000\nsentinel failover-timeout tp 5000\nsentinel parallel-syncs tp 1\n",
                dir.path().display()
            ),
        )
        .unwrap();
        sentinels.push(Process::spawn(
            &program,
            &[conf.display().to_string(), "--sentinel".to_owned()],
            &dir.path().join(format!("sentinel-{i}.log")),
            &[],
        ));
        tp_test_support::services::wait_for_port(port, "redis-sentinel").await;
        urls.push((port, format!("redis://127.0.0.1:{port}")));
    }
    let master = |port: u16| {
        let (_, out) = cli(&[
            "-p".into(),
            port.to_string(),
            "sentinel".into(),
            "get-master-addr-by-name".into(),
            "tp".into(),
        ]);
        out.lines()
            .nth(1)
            .and_then(|p| p.trim().parse::<u16>().ok())
    };
    eventually(
        "the sentinels agree on the primary and see each other",
        Duration::from_secs(20),
        || async {
            let (_, quorum) = cli(&[
                "-p".into(),
                urls[0].0.to_string(),
                "sentinel".into(),
                "ckquorum".into(),
                "tp".into(),
            ]);
            (quorum.starts_with("OK") && urls.iter().all(|(p, _)| master(*p) == Some(primary_port)))
                .then_some(())
        },
    )
    .await;

    let fleet = Fleet::start(0, "").await;
    let seeds: Vec<String> = urls.iter().map(|(_, u)| u.clone()).collect();
    let extra = "[cache]\nredis_sentinel_master = \"tp\"\n";
    let mut edges = Vec::new();
    for _ in 0..2 {
        edges.push(
            EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&seeds.join(",")), extra).await,
        );
    }
    for edge in &edges {
        eventually(
            "the edge on the primary",
            Duration::from_secs(10),
            || async { (redis_state(edge).await == "up").then_some(()) },
        )
        .await;
    }
    let key = testing_tenant(&fleet, "metered").await;
    limit(&fleet, "metered", 10).await;
    let served = metered(&[&edges[0], &edges[1]], &key, 8).await;
    assert_eq!(served.iter().sum::<usize>(), 10, "before: {served:?}");

    // The primary killed under load.
    limit(&fleet, "qa", 1_000_000).await;
    let load = Load::start(&fleet, &edges);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let killed = Instant::now();
    primary.kill9().await;
    eventually("the replica promoted", Duration::from_secs(30), || async {
        urls.iter()
            .all(|(p, _)| master(*p) == Some(replica_port))
            .then_some(())
    })
    .await;
    let failover = killed.elapsed();
    // The edges on the new primary: Redis up on both, no new Redis error for a second.
    let recovering = Instant::now();
    let mut last = f64::MAX;
    let mut quiet_since = Instant::now();
    loop {
        let mut errors = 0.0;
        let mut up = true;
        for edge in &edges {
            errors += metric(
                &edge.admin_get("/metrics").await.1,
                "tp_edge_redis_errors_total",
            );
            up &= redis_state(edge).await == "up";
        }
        if errors != last || !up {
            quiet_since = Instant::now();
        }
        last = errors;
        if quiet_since.elapsed() >= Duration::from_secs(1) {
            break;
        }
        assert!(
            recovering.elapsed() < Duration::from_secs(20),
            "the edges did not follow the failover: {}",
            edges[0].log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let back = recovering.elapsed();
    let (ok, failed) = load.finish().await;
    println!(
        "Redis Sentinel (primary + replica, 3 sentinels): primary killed under load; replica promoted after {failover:?}; edges quiet on it {back:?} later; {ok} list+call rounds ok, {failed} failed"
    );
    assert_eq!(failed, 0, "requests failed because the primary died");
    assert!(ok > 20, "too little load to mean anything: {ok}");
    // Rate limits count on the new primary again (a fresh window for another tenant).
    let key = testing_tenant(&fleet, "metered-after").await;
    limit(&fleet, "metered-after", 10).await;
    let served = metered(&[&edges[0], &edges[1]], &key, 8).await;
    assert_eq!(
        served.iter().sum::<usize>(),
        10,
        "after: {served:?}{}",
        limits_seen(&[&edges[0], &edges[1]]).await
    );
    let (_, keys) = cli(&["-p".into(), replica_port.to_string(), "dbsize".into()]);
    assert!(keys.trim().parse::<u64>().unwrap_or(0) > 0, "{keys}");
}

/// `INFO commandstats`' count of `command` on the Redis at `port`.
fn redis_calls(port: u16, command: &str) -> u64 {
    let (ok, stats) = cli(&[
        "-p".to_owned(),
        port.to_string(),
        "INFO".to_owned(),
        "commandstats".to_owned(),
    ]);
    assert!(ok, "redis-cli INFO: {stats}");
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.trim().strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// How many shared identities the Redis at `port` holds (`toolplane:id:<hash>`).
fn shared_identities(port: u16) -> usize {
    let (ok, keys) = cli(&[
        "-p".to_owned(),
        port.to_string(),
        "--scan".to_owned(),
        "--pattern".to_owned(),
        "*:id:*".to_owned(),
    ]);
    assert!(ok, "redis-cli --scan: {keys}");
    keys.lines().filter(|line| !line.trim().is_empty()).count()
}

/// A world with `count` extra tenants, each with one key, imported in one revision into a new
/// store: the control plane on it, and the keys.
async fn bulk_world(work: &Path, count: usize) -> (ControlPlaneProcess, Vec<String>) {
    let ctl = |args: &[&str]| {
        let out = std::process::Command::new(tp_test_support::binary("toolplanectl"))
            .args(args)
            .output()
            .expect("toolplanectl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let sqlite = |dir: &Path| format!("sqlite://{}", dir.join("control-plane.db").display());
    let mut seed = ControlPlaneProcess::start(true).await;
    seed.process.terminate().await;
    let export = work.join("export.json");
    ctl(&[
        "export",
        "--store-url",
        &sqlite(&seed.data_dir),
        "--out",
        export.to_str().unwrap(),
    ]);
    let mut document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    // Each new tenant copies one of the seed's, with its own names, the default roles and
    // nothing else of its own; each key is written out.
    let objects = document["objects"].as_array_mut().unwrap();
    let template = objects
        .iter()
        .find(|o| o["kind"] == "tenant")
        .expect("a tenant in the seed")["object"]
        .clone();
    let keys: Vec<String> = (0..count).map(|i| format!("tpk_{:064x}", i + 1)).collect();
    for (i, key) in keys.iter().enumerate() {
        let tenant = format!("bulk{i:05}");
        let mut object = template.clone();
        object["id"] = json!(tenant);
        object["uid"] = json!(format!("bulk-{i}"));
        object["connected_apis"] = json!(["google"]);
        for own in ["roles", "token_issuers", "approvals"] {
            object[own] = json!([]);
        }
        objects.push(json!({"kind": "tenant", "object": object}));
        objects.push(json!({"kind": "api_key", "object": {
            "id": format!("key-{tenant}"), "tenant": tenant, "role": "collector",
            "hash": tp_proto::keys::hash(key), "label": "bulk",
            "created_at": 1_763_900_000_000_u64, "expires_at": null, "revoked_at": null,
        }}));
    }
    let grown = work.join("grown.json");
    std::fs::write(&grown, serde_json::to_vec(&document).unwrap()).unwrap();
    let world = work.join("world");
    std::fs::create_dir_all(&world).unwrap();
    ctl(&[
        "import",
        grown.to_str().unwrap(),
        "--store-url",
        &sqlite(&world),
    ]);
    for token in ["admin-token", "edge-token"] {
        std::fs::copy(seed.data_dir.join(token), world.join(token)).unwrap();
    }
    (
        ControlPlaneProcess::start_in(&world, Vec::new()).await,
        keys,
    )
}

/// A bulk import is one revision with every key in it, and an edge that starts replays it,
/// checking Redis, for each key, for a shared identity the change made stale. It did that one
/// key after another (two or three round trips each): after an import of 100,000 keys a new
/// edge did not report itself synced for minutes. Now the keys are read in pipelined
/// batches; the edge's Redis connection carries a few dozen reads for 3,000 keys, where it
/// carried at least one per key. What it forgets stays right: the identities resolved after
/// the import stay in Redis, and a key revoked afterwards leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_edge_replays_a_bulk_import_of_keys_in_a_few_redis_round_trips() {
    const KEYS: usize = 3_000;
    const RESOLVED: usize = 100;
    let work = tempfile::tempdir().unwrap();
    let (mut cp, keys) = bulk_world(work.path(), KEYS).await;
    let redis = RedisProcess::start().await;
    // Edge A resolves a hundred of the keys: their identities land in Redis, newer than the
    // import.
    let mut a = EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), "").await;
    for key in &keys[..RESOLVED] {
        let reply = McpHttp::new(&a.addr, Some(key), LEGACY)
            .request(1, "tools/list", json!({}))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    eventually(
        "the resolved identities in Redis",
        Duration::from_secs(10),
        || async { (shared_identities(redis.port) == RESOLVED).then_some(()) },
    )
    .await;
    // Edge B reaches Redis through a proxy that counts its reads, and starts while the control
    // plane is down, so that its Redis connection is up before it replays the log.
    cp.process.terminate().await;
    let proxy = StallProxy::start(&format!("127.0.0.1:{}", redis.port)).await;
    let b = EdgeProcess::start(
        &cp,
        &[cp.url()],
        Some(&format!("redis://{}", proxy.addr)),
        "",
    )
    .await;
    let on_b = McpHttp::new(&b.addr, Some(&keys[0]), LEGACY);
    eventually(
        "edge B's Redis to be up",
        Duration::from_secs(10),
        || async {
            let _ = on_b.request(1, "tools/list", json!({})).await;
            (redis_state(&b).await == "up").then_some(())
        },
    )
    .await;
    let (gets_before, reads_before) = (redis_calls(redis.port, "get"), proxy.requests_read());
    cp.restart_same_port().await;
    eventually("edge B to catch up", Duration::from_secs(60), || async {
        let (_, ready) = b.get("/readyz").await;
        ready.contains("\"watch_synced\":true").then_some(())
    })
    .await;
    let gets = redis_calls(redis.port, "get") - gets_before;
    let reads = proxy.requests_read() - reads_before;
    println!(
        "edge B replayed an import of {KEYS} keys with {gets} GETs in {reads} reads of its Redis connection"
    );
    assert!(
        gets >= KEYS as u64,
        "the replay did not look every key up in Redis: {gets} GETs"
    );
    assert!(
        reads <= KEYS as u64 / 20,
        "the replay waited for Redis about once per key: {reads} reads for {gets} GETs"
    );
    assert_eq!(
        shared_identities(redis.port),
        RESOLVED,
        "the replay forgot identities resolved after the import"
    );
    // A key revoked now is dropped from Redis by B (A is stopped), and refused.
    a.process.kill9().await;
    let mut admin = cp.admin().await;
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: "key-bulk00000".into(),
        })
        .await
        .unwrap();
    eventually(
        "the revoked key's identity gone from Redis",
        Duration::from_secs(10),
        || async { (shared_identities(redis.port) == RESOLVED - 1).then_some(()) },
    )
    .await;
    eventually(
        "the revoked key refused on B",
        Duration::from_secs(10),
        || async { (on_b.request(1, "tools/list", json!({})).await.status == 401).then_some(()) },
    )
    .await;
}
