//! Documents that must stay true: `docs/TOOLS.md` is generated from the demo catalogue, and no
//! document states a tool count the demo catalogue contradicts.

use std::path::{Path, PathBuf};

use tp_proto::pb;
use tp_test_support::ControlPlaneProcess;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[tokio::test]
async fn tools_md_is_generated_from_the_demo_catalogue_and_no_document_contradicts_it() {
    let cp = ControlPlaneProcess::start(true).await;
    let mut admin = cp.admin().await;
    let rendered = admin
        .policy
        .render_tools_doc(pb::RenderToolsDocRequest {})
        .await
        .unwrap()
        .into_inner()
        .markdown;
    let path = root().join("docs/TOOLS.md");
    if std::env::var_os("TOOLPLANE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "docs/TOOLS.md has drifted from the demo catalogue; regenerate it with\n  \
         TOOLPLANE_UPDATE_GOLDEN=1 cargo nextest run --workspace -E 'test(/tools_md/)'\n\
         or `toolplanectl docs render > docs/TOOLS.md` against `toolplane up`"
    );
    let count = rendered.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(count, 34, "the demo catalogue has 34 tools");

    // The stated counts in README and docs/ agree with the catalogue (the seeds' doc-drift).
    let mut files = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut checked = 0;
    for file in &files {
        // Prose only: fenced code blocks hold deliberate counter-examples (the README's drift demo).
        let mut fenced = false;
        let mut text = String::new();
        for line in std::fs::read_to_string(file).unwrap().lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            text.push_str(if fenced { "" } else { line });
            text.push('\n');
        }
        let reply = admin
            .policy
            .check_document(pb::CheckDocumentRequest {
                text,
                name: file.display().to_string(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            reply.findings.is_empty(),
            "{} states counts the catalogue contradicts: {:?}",
            file.display(),
            reply.findings
        );
        checked += 1;
    }
    // A stale copy of the table (issue 34): a description and a tool's hints changed since it
    // was rendered; `CheckDocument` names both rows and columns.
    let hinted = rendered
        .lines()
        .find(|l| l.starts_with("| `") && l.contains("| read-only"))
        .expect("a read-only tool")
        .to_owned();
    let stale = rendered
        .replacen("Durable key-value state", "Durable state", 1)
        .replacen(&hinted, &hinted.replacen("| read-only", "| writes", 1), 1);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &stale).unwrap();
    let (code, stdout, stderr) = crate::control_plane::run(
        &tp_test_support::binary("toolplanectl"),
        &[
            "--addr",
            &cp.addr,
            "--token",
            &cp.admin_token(),
            "docs",
            "check",
            &file.path().display().to_string(),
        ],
    )
    .await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(":8: agent_state: What it does says \"Durable state"),
        "{stdout}"
    );
    let reply = admin
        .policy
        .check_document(pb::CheckDocumentRequest {
            text: stale,
            name: "stale TOOLS.md".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let rows: Vec<(&str, &str)> = reply
        .findings
        .iter()
        .map(|f| (f.tool.as_str(), f.column.as_str()))
        .collect();
    let hinted_tool = hinted.split('`').nth(1).unwrap();
    assert_eq!(
        rows,
        [("agent_state", "What it does"), (hinted_tool, "Hints")],
        "{:?}",
        reply.findings
    );
    println!(
        "docs/TOOLS.md matches the demo catalogue ({count} tools); {checked} documents state no contradicting count; a stale table's changed description and hints are named"
    );
}

/// Every RPC of the wire contract has a grpcurl example in docs/grpc-api.md.
#[test]
fn every_rpc_has_a_grpcurl_example() {
    let doc = std::fs::read_to_string(root().join("docs/grpc-api.md")).unwrap();
    let mut rpcs = 0;
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join("proto/toolplane/v1")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let mut service = "";
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("service ") {
                service = rest.split_whitespace().next().unwrap_or_default();
            } else if let Some(rest) = line.strip_prefix("rpc ") {
                let rpc = rest.split('(').next().unwrap_or_default().trim();
                let example = format!("toolplane.v1.{service}/{rpc}");
                rpcs += 1;
                if !doc.contains(&example) {
                    missing.push(example);
                }
            }
        }
    }
    assert!(rpcs > 40, "{rpcs} RPCs found");
    assert!(
        missing.is_empty(),
        "no grpcurl example in docs/grpc-api.md for {missing:?}"
    );
    println!("docs/grpc-api.md has a grpcurl example for each of the {rpcs} RPCs");
}

/// The threat model's table of attacks (docs/reliability.md) and the trust suites agree: every
/// row names a test of the trust suites (`tests/trust.rs`, `trust_wiki.rs`, `trust_control.rs`,
/// `trust_edge.rs`), every test there has a row,
/// and every row says which boundary it crosses and what must happen.
#[test]
fn every_attack_of_the_threat_model_has_its_test_and_every_test_its_row() {
    let doc = std::fs::read_to_string(root().join("docs/reliability.md")).unwrap();
    let section = doc
        .split("## Threat model")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/reliability.md has a Threat model section");
    let mut rows = Vec::new();
    for line in section
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("`trust"))
    {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 4, "attack, boundary, outcome, test: {line}");
        assert!(
            cells.iter().all(|c| !c.is_empty()),
            "a row with an empty cell: {line}"
        );
        rows.push(cells[3].trim_matches('`').to_owned());
    }
    let mut tests = Vec::new();
    for (module, file) in [
        ("trust", "tests/trust.rs"),
        ("trust_wiki", "tests/trust_wiki.rs"),
        ("trust_control", "tests/trust_control.rs"),
        ("trust_edge", "tests/trust_edge.rs"),
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("async fn t")
                && rest.starts_with(|c: char| c.is_ascii_digit())
            {
                let name = format!("t{}", rest.split('(').next().unwrap());
                tests.push(format!("{module}::{name}"));
            }
        }
    }
    for row in &rows {
        assert!(
            tests.contains(row),
            "the threat model names {row}, which is not a trust test"
        );
    }
    for test in &tests {
        assert!(rows.contains(test), "{test} has no row in the threat model");
    }
    assert!(rows.len() >= 13, "{} attacks", rows.len());
    println!(
        "threat model: {} attacks, each with its test in the trust suites",
        rows.len()
    );
}

/// Markdown files of the repository (README, docs/, deploy/, crates' own), not generated ones.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    walk(&path, out);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root(), &mut files);
    files.sort();
    files
}

/// Top-level folders a path in the docs may start with.
const REPO_DIRS: [&str; 11] = [
    "crates/",
    "services/",
    "docs/",
    "deploy/",
    "tests/",
    "scripts/",
    "proto/",
    "bench/",
    ".ci/",
    ".config/",
    "benches/",
];

/// Issue 19.4: every relative link in a Markdown file resolves, and every repository path a
/// document names in backticks (`services/edge/src/app.rs`, `docs/adr/`) exists.
#[test]
fn every_intra_repo_link_and_named_path_in_the_docs_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let base = file.parent().unwrap();
        let shown = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (number, line) in text.lines().enumerate() {
            let links = line.split("](").skip(1).filter_map(|rest| {
                let end = rest.find(')')?;
                let target = &rest[..end];
                (!target.is_empty() && !target.contains(char::is_whitespace)).then_some(target)
            });
            for target in links {
                if target.contains("://")
                    || target.starts_with('#')
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                let path = target.split('#').next().unwrap_or_default();
                checked += 1;
                if !base.join(path).exists() {
                    missing.push(format!("{shown}:{}: link {target}", number + 1));
                }
            }
            let spans = line.split('`').skip(1).step_by(2);
            for span in spans {
                if !span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
                {
                    continue;
                }
                let named = span.trim_end_matches(['.', ',']);
                if !REPO_DIRS.iter().any(|d| named.starts_with(d)) || named.contains("..") {
                    continue;
                }
                checked += 1;
                if !root().join(named).exists() {
                    missing.push(format!("{shown}:{}: path `{named}`", number + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "links and paths that do not exist:\n{}",
        missing.join("\n")
    );
    assert!(checked > 50, "only {checked} links and paths found");
    println!("{checked} intra-repo links and named paths resolve");
}
