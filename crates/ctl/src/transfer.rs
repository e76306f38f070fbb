//! `toolplanectl export` / `import`: the whole control-plane state — catalogue, ceiling and its
//! history, ADRs, tenants, API keys (hashes only), executors, providers, roles — as one JSON
//! document, read from and written to a store directly. For moving from SQLite to PostgreSQL,
//! backups you can read, and seeding test environments.
//!
//! Export reads one consistent snapshot (safe while the control plane runs). Import writes the
//! document as the first revision of an empty store and refuses a store that has any history,
//! so it can never merge two worlds by accident.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use tp_registry::{Change, Object, State};
use tp_store::{Commit, PostgresStore, SqliteStore, Store};

/// The document's format tag.
pub const FORMAT: &str = "toolplane-export/1";

/// The exported document.
#[derive(Debug, Serialize, Deserialize)]
pub struct Export {
    /// [`FORMAT`].
    pub format: String,
    /// The source store's revision at export time.
    pub revision: u64,
    /// Unix milliseconds at export time.
    pub exported_at_ms: u64,
    /// Every object, in kind and key order.
    pub objects: Vec<Object>,
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
    let document = Export {
        format: FORMAT.to_owned(),
        revision: snapshot.revision,
        exported_at_ms: crate::output::now_ms(),
        objects: snapshot.objects,
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
    // Tools flatten their definition (serde cannot flag unknown fields through `flatten`):
    // each tool object is checked again, as written, as a definition.
    let raw: serde_json::Value = serde_json::from_str(&text)?;
    let objects = raw["objects"].as_array().map_or(0, Vec::len);
    let mut progress = crate::progress::Progress::new("import: checking objects", objects);
    for object in raw["objects"].as_array().into_iter().flatten() {
        progress.step(object["kind"].as_str().unwrap_or_default());
        if object["kind"] == "tool" {
            let mut value = object["object"].clone();
            if let Some(map) = value.as_object_mut() {
                map.remove("status");
                map.remove("revision");
            }
            let name = value["name"].as_str().unwrap_or_default().to_owned();
            let _: tp_registry::ToolDef =
                tp_registry::strict::from_value(value, &format!("tool {name}"))
                    .map_err(anyhow::Error::msg)?;
        }
    }
    if document.format != FORMAT {
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
    let changes: Vec<Change> = document
        .objects
        .into_iter()
        .map(|object| Change::Put { object })
        .collect();
    let count = changes.len();
    eprintln!("import: writing {count} objects as one revision…");
    match store
        .commit(0, &changes, crate::output::now_ms(), "system")
        .await?
    {
        Commit::Committed(revision) => {
            eprintln!("imported {count} objects as revision {revision}");
            Ok(0)
        }
        Commit::Conflict { current } => {
            bail!("another writer got there first (revision {current}); nothing imported")
        }
    }
}
