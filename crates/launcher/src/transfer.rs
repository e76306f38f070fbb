//! `toolplane export` / `import`: the whole control-plane state — catalogue, ceiling and its
//! history, ADRs, tenants, API keys (hashes only), executors, providers, roles — as one JSON
//! document, read from and written to a store directly. For moving from SQLite to PostgreSQL,
//! backups you can read, and seeding test environments.
//!
//! The history goes with it: the audit trail (oldest first), the usage counters per tenant
//! and tool (what `toolplanectl usage --unused-days` reads) and the records each edge shed, so
//! that a store moved to PostgreSQL does not call every tool unused.
//!
//! Export reads one consistent snapshot of the objects (safe while the control plane runs; the
//! history is read after it, so calls made meanwhile may or may not be in it). Import writes
//! the document as the first revision of an empty store and refuses a store that has any
//! history, so it can never merge two worlds by accident.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use tp_registry::{Change, Object, State};
use tp_store::{Commit, PostgresStore, SqliteStore, Store};

/// The document's format tag (`/1` documents, without history, are read too).
pub const FORMAT: &str = "toolplane-export/2";

/// The format before the history was exported.
const FORMAT_1: &str = "toolplane-export/1";

/// The exported document.
#[derive(Debug, Serialize, Deserialize)]
pub struct Export {
    /// The document's format, [`FORMAT`] when written by this version.
    pub format: String,
    /// The source store's revision at export time.
    pub revision: u64,
    /// Unix milliseconds at export time.
    pub exported_at_ms: u64,
    /// Every object, in kind and key order.
    pub objects: Vec<Object>,
    /// The audit trail, oldest first.
    #[serde(default)]
    pub audit: Vec<ExportedCall>,
    /// Usage counters, per tenant and tool.
    #[serde(default)]
    pub usage: Vec<ExportedUsage>,
    /// Audit records each edge shed before delivering them.
    #[serde(default)]
    pub audit_shed: Vec<ExportedShed>,
}

/// One audit record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedCall {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// The request id the edge logged the call under.
    pub request_id: String,
    /// The edge that served the call.
    pub edge: String,
    /// The caller's tenant.
    pub tenant: String,
    /// The caller: an API key id, or `issuer#subject` for an access token.
    pub principal: String,
    /// The role the caller acted with.
    pub role: String,
    /// The tool called.
    pub tool: String,
    /// The action of a polymorphic tool, else empty.
    pub action: String,
    /// `ok`, `tool_error`, `executor_error`, `rejected` or `input_required`.
    pub outcome: String,
    /// Why the call did not succeed; empty on success.
    pub error_code: String,
    /// How long the edge took, in milliseconds.
    pub duration_ms: u32,
    /// The approval the call needed (JSON), empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub approval: String,
}

/// One usage counter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedUsage {
    /// The tenant the counter is for.
    pub tenant: String,
    /// The tool it counts calls of.
    pub tool: String,
    /// Calls counted, failed ones included.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Unix milliseconds of the last call.
    pub last_used_ms: u64,
}

/// Records one edge shed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedShed {
    /// The edge that dropped the records.
    pub edge: String,
    /// How many records it dropped.
    pub records: u64,
}

impl From<tp_store::CallRecord> for ExportedCall {
    fn from(r: tp_store::CallRecord) -> Self {
        ExportedCall {
            at_ms: r.at_ms,
            request_id: r.request_id,
            edge: r.edge,
            tenant: r.tenant,
            principal: r.principal,
            role: r.role,
            tool: r.tool,
            action: r.action,
            outcome: r.outcome,
            error_code: r.error_code,
            duration_ms: r.duration_ms,
            approval: r.approval,
        }
    }
}

impl From<ExportedCall> for tp_store::CallRecord {
    fn from(r: ExportedCall) -> Self {
        tp_store::CallRecord {
            at_ms: r.at_ms,
            request_id: r.request_id,
            edge: r.edge,
            tenant: r.tenant,
            principal: r.principal,
            role: r.role,
            tool: r.tool,
            action: r.action,
            outcome: r.outcome,
            error_code: r.error_code,
            duration_ms: r.duration_ms,
            approval: r.approval,
        }
    }
}

/// The store's history: the whole audit trail (a page at a time), usage and shed counts.
async fn history(
    store: &dyn Store,
) -> anyhow::Result<(Vec<ExportedCall>, Vec<ExportedUsage>, Vec<ExportedShed>)> {
    let mut audit = Vec::new();
    let mut after_seq = 0;
    loop {
        let page = store
            .audit(&tp_store::AuditQuery {
                after_seq,
                limit: 1000,
                ..Default::default()
            })
            .await
            .context("reading the audit trail")?;
        let Some(last) = page.last() else { break };
        after_seq = last.seq;
        audit.extend(page.into_iter().map(|e| ExportedCall::from(e.record)));
    }
    let usage = store
        .usage_rows()
        .await
        .context("reading the usage counters")?
        .into_iter()
        .map(|(tenant, u)| ExportedUsage {
            tenant,
            tool: u.tool,
            calls: u.calls,
            errors: u.errors,
            last_used_ms: u.last_used_ms,
        })
        .collect();
    let audit_shed = store
        .audit_shed()
        .await
        .context("reading the shed counts")?
        .into_iter()
        .map(|(edge, records)| ExportedShed { edge, records })
        .collect();
    Ok((audit, usage, audit_shed))
}

/// `export --store-url URL [--out FILE]`
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Store to read: `sqlite://PATH` or `postgres://USER@HOST/DB` (default: the local data dir).
    #[arg(long, default_value = "sqlite://.toolplane/control-plane.db")]
    pub store_url: String,
    /// Write here instead of stdout (mode 0600: the document holds key hashes).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `import FILE --store-url URL`
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The document written by `export`.
    pub file: PathBuf,
    /// Store to write; must be empty (revision 0).
    #[arg(long)]
    pub store_url: String,
}

async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            bail!("--store-url: sqlite:// needs a path");
        }
        return Ok(Arc::new(
            SqliteStore::open(std::path::Path::new(path)).await?,
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(url).await?));
    }
    bail!("--store-url: {url:?} is not sqlite://PATH or postgres://USER@HOST/DB")
}

/// Runs `export`.
pub async fn export(args: ExportArgs) -> anyhow::Result<i32> {
    if let Some(path) = args.store_url.strip_prefix("sqlite://")
        && !std::path::Path::new(path).exists()
    {
        bail!("no SQLite store at {path}");
    }
    let started = std::time::Instant::now();
    eprintln!("export: reading {}…", args.store_url);
    let store = open(&args.store_url).await?;
    let snapshot = store.load().await.context("reading the store")?;
    eprintln!(
        "export: {} objects at revision {} read in {:.1} s",
        snapshot.objects.len(),
        snapshot.revision,
        started.elapsed().as_secs_f64()
    );
    let (audit, usage, audit_shed) = history(store.as_ref()).await?;
    eprintln!(
        "export: {} audit records, {} usage counters",
        audit.len(),
        usage.len()
    );
    let document = Export {
        format: FORMAT.to_owned(),
        revision: snapshot.revision,
        exported_at_ms: tp_ctl::output::now_ms(),
        objects: snapshot.objects,
        audit,
        usage,
        audit_shed,
    };
    let text = serde_json::to_string_pretty(&document)?;
    match &args.out {
        Some(path) => {
            tp_control_plane::server::write_private(path, &text)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "exported {} objects at revision {} to {}",
                document.objects.len(),
                document.revision,
                path.display()
            );
        }
        None => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stdout().lock(), "{text}");
        }
    }
    Ok(0)
}

/// Runs `import`.
pub async fn import(args: ImportArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let document: Export =
        tp_registry::strict::from_json_str(&text, &format!("{}", args.file.display()))
            .map_err(|e| anyhow::anyhow!("{e} (not a toolplane export this version reads)"))?;
    check_tools_as_written(&text)?;
    if document.format != FORMAT && document.format != FORMAT_1 {
        bail!(
            "{} has format {:?}; this toolplanectl reads {FORMAT:?}",
            args.file.display(),
            document.format
        );
    }
    // The objects must make a coherent state (every reference resolves) before anything is
    // written: rebuild it in memory the way the control plane loads a snapshot.
    let mut state = State::default();
    for object in &document.objects {
        state.put(object.clone());
    }
    if state.policy.is_none() {
        bail!("the document has no ceiling policy; refusing to import a partial world");
    }
    let store = open(&args.store_url).await?;
    let head = store.head().await?;
    if head != 0 {
        bail!("the target store is at revision {head}, not empty; import only into a new store");
    }
    let Export {
        objects,
        audit,
        usage,
        audit_shed,
        ..
    } = document;
    let changes: Vec<Change> = objects
        .into_iter()
        .map(|object| Change::Put { object })
        .collect();
    let count = changes.len();
    eprintln!("import: writing {count} objects as one revision…");
    match store
        .commit(0, &changes, tp_ctl::output::now_ms(), "system")
        .await?
    {
        Commit::Committed(revision) => {
            eprintln!("imported {count} objects as revision {revision}");
            import_history(store.as_ref(), audit, usage, audit_shed).await?;
            Ok(0)
        }
        Commit::Conflict { current } => {
            bail!("another writer got there first (revision {current}); nothing imported")
        }
    }
}

/// Tools flatten their definition (serde cannot flag unknown fields through `flatten`): each
/// tool object of the document is checked again, as written, as a definition.
fn check_tools_as_written(text: &str) -> anyhow::Result<()> {
    let raw: serde_json::Value = serde_json::from_str(text)?;
    let objects = raw["objects"].as_array().map_or(0, Vec::len);
    let mut progress = tp_ctl::progress::Progress::new("import: checking objects", objects);
    for object in raw["objects"].as_array().into_iter().flatten() {
        progress.step(object["kind"].as_str().unwrap_or_default());
        if object["kind"] == "tool" {
            let mut value = object["object"].clone();
            // The catalogue's own fields beside the definition.
            if let Some(map) = value.as_object_mut() {
                for field in ["status", "revision", "pin", "findings", "drift"] {
                    map.remove(field);
                }
            }
            let name = value["name"].as_str().unwrap_or_default().to_owned();
            let _: tp_registry::ToolDef =
                tp_registry::strict::from_value(value, &format!("tool {name}"))
                    .map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}

/// The audit records, usage counters and shed counts of an export, written after its objects.
async fn import_history(
    store: &dyn Store,
    audit: Vec<ExportedCall>,
    usage: Vec<ExportedUsage>,
    shed: Vec<ExportedShed>,
) -> anyhow::Result<()> {
    let audit: Vec<tp_store::CallRecord> = audit.into_iter().map(Into::into).collect();
    let usage: Vec<(String, tp_store::ToolUsage)> = usage
        .into_iter()
        .map(|u| {
            (
                u.tenant,
                tp_store::ToolUsage {
                    tool: u.tool,
                    calls: u.calls,
                    errors: u.errors,
                    last_used_ms: u.last_used_ms,
                },
            )
        })
        .collect();
    let shed: Vec<(String, u64)> = shed.into_iter().map(|s| (s.edge, s.records)).collect();
    store.import_history(&audit, &usage, &shed).await.context(
        "writing the history (the objects are imported; import into a new store to try again)",
    )?;
    eprintln!(
        "imported {} audit records and {} usage counters",
        audit.len(),
        usage.len()
    );
    Ok(())
}
