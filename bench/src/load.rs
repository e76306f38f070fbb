//! Driving load and reading figures: wrk runs (a Lua script per request shape), core pinning,
//! resident memory, percentiles, and the table every scenario adds rows and notes to.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::bail;
use serde_json::{Value, json};
use tp_test_support::free_port;

pub(crate) const LEGACY: &str = "2025-11-25";
pub(crate) const STATELESS: &str = "2026-07-28";

/// Installs wrk from Debian's packages when it is missing.
pub(crate) fn ensure_wrk() -> anyhow::Result<()> {
    if std::process::Command::new("wrk").arg("-v").output().is_ok() {
        return Ok(());
    }
    eprintln!("installing wrk from Debian's packages");
    let status = std::process::Command::new("apt-get")
        .args(["install", "-y", "-qq", "wrk"])
        .status()?;
    if !status.success() {
        bail!("wrk is missing and apt-get could not install it");
    }
    Ok(())
}

/// Pins a process (all its threads) to one core.
pub(crate) fn pin(pid: u32, core: u32) {
    let _ = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &core.to_string(), &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status();
}

/// A process's resident memory, MiB.
pub(crate) fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// How long and how much.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    /// Seconds per load run.
    pub(crate) seconds: u64,
    /// Fewer calls and writes.
    pub(crate) quick: bool,
}

/// One load run's figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct Load {
    pub(crate) rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub(crate) errors: u64,
    pub(crate) requests: u64,
}

/// How wrk sends requests.
#[derive(Clone)]
pub(crate) struct Script<'a> {
    pub(crate) body: &'a str,
    pub(crate) headers: Vec<(&'a str, String)>,
    /// Rotate `Authorization: Bearer <key>` over this file's lines.
    pub(crate) keys: Option<&'a Path>,
    pub(crate) random: bool,
}

fn lua(script: &Script<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "local body = [==[{}]==]", script.body);
    out.push_str("local headers = {}\n");
    for (name, value) in &script.headers {
        let _ = writeln!(out, "headers[\"{name}\"] = [==[{value}]==]");
    }
    let _ = writeln!(
        out,
        "local keys = {{}}\nlocal kf = [==[{}]==]\nif kf ~= \"\" then for line in io.lines(kf) do keys[#keys + 1] = line end end",
        script
            .keys
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "local i = 0\nlocal random = {}\nmath.randomseed(42)",
        script.random
    );
    out.push_str(
        "request = function()\n  if #keys > 0 then\n    if random then i = math.random(#keys) else i = (i % #keys) + 1 end\n    headers[\"Authorization\"] = \"Bearer \" .. keys[i]\n  end\n  return wrk.format(\"POST\", nil, headers, body)\nend\n",
    );
    out.push_str(
        "done = function(summary, latency, requests)\n  local e = summary.errors\n  io.write(string.format('WRKJSON {\"requests\":%d,\"duration_us\":%d,\"errors\":%d,\"p50_us\":%d,\"p99_us\":%d}\\n', summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout + e.status, latency:percentile(50), latency:percentile(99)))\nend\n",
    );
    out
}

/// Runs wrk (one thread, pinned to core 1) against `url`.
pub(crate) fn wrk(
    dir: &Path,
    url: &str,
    connections: u32,
    seconds: u64,
    script: &Script<'_>,
) -> Load {
    let path = dir.join(format!("wrk-{}.lua", free_port()));
    std::fs::write(&path, lua(script)).expect("lua script");
    let output = std::process::Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .arg("--timeout")
        .arg("10s")
        .arg("-s")
        .arg(&path)
        .arg(url)
        .output()
        .expect("wrk");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("WRKJSON "))
        .unwrap_or_else(|| panic!("wrk printed no summary:\n{stdout}"));
    let v: Value = serde_json::from_str(line).expect("wrk summary");
    let requests = v["requests"].as_u64().unwrap_or(0);
    let duration = v["duration_us"].as_f64().unwrap_or(1.0) / 1e6;
    Load {
        rps: requests as f64 / duration,
        p50_us: v["p50_us"].as_f64().unwrap_or(0.0),
        p99_us: v["p99_us"].as_f64().unwrap_or(0.0),
        errors: v["errors"].as_u64().unwrap_or(0),
        requests,
    }
}

/// A `tools/list` request body for `version`.
pub(crate) fn list_body(version: &str) -> String {
    if version == STATELESS {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string()
    } else {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string()
    }
}

/// The headers of a `tools/list` for `version`, with `key` when given.
pub(crate) fn list_headers(version: &str, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", version.to_owned()),
    ];
    if version == STATELESS {
        headers.push(("Mcp-Method", "tools/list".to_owned()));
    }
    if let Some(key) = key {
        headers.push(("Authorization", format!("Bearer {key}")));
    }
    headers
}

/// The `p` percentile of `sorted`.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Rows and notes of the final table.
#[derive(Default)]
pub(crate) struct Table {
    pub(crate) rows: Vec<[String; 7]>,
    pub(crate) notes: Vec<String>,
    /// Goals a scenario asserts and missed: the run fails after printing the table.
    pub(crate) missed: Vec<String>,
}

impl Table {
    /// A row: `load`, its ratio to `baseline`, and the edge's resident memory.
    pub(crate) fn load(
        &mut self,
        scenario: &str,
        load: &Load,
        baseline: Option<&Load>,
        rss: Option<f64>,
    ) {
        self.rows.push([
            scenario.to_owned(),
            format!("{:.0}", load.rps),
            format!("{:.0}", load.p50_us),
            format!("{:.0}", load.p99_us),
            load.errors.to_string(),
            baseline.map_or("—".into(), |b| format!("{:.2}×", load.rps / b.rps)),
            rss.map_or("—".into(), |r| format!("{r:.1}")),
        ]);
    }

    /// Errors across every row.
    pub(crate) fn errors(&self) -> u64 {
        self.rows
            .iter()
            .filter_map(|r| r[4].parse::<u64>().ok())
            .sum()
    }

    /// Prints the table, then the notes.
    pub(crate) fn print(&self) {
        let headers = [
            "scenario",
            "req/s",
            "p50 µs",
            "p99 µs",
            "errors",
            "vs baseline",
            "edge RSS MiB",
        ];
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: Vec<String>| {
            let mut out = String::from("|");
            for (i, cell) in cells.iter().enumerate() {
                let pad = widths[i] - cell.chars().count();
                let _ = write!(out, " {cell}{} |", " ".repeat(pad));
            }
            out
        };
        println!(
            "{}",
            line(headers.iter().map(|h| (*h).to_owned()).collect())
        );
        println!(
            "|{}",
            widths
                .iter()
                .map(|w| format!("{}|", "-".repeat(w + 2)))
                .collect::<String>()
        );
        for row in &self.rows {
            println!("{}", line(row.to_vec()));
        }
        for note in &self.notes {
            println!("{note}");
        }
    }
}
