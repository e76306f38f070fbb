//! `docs …`: TOOLS.md and drift.

use super::*;

pub(super) async fn docs(mut admin: Admin, cmd: DocsCmd, json_out: bool) -> anyhow::Result<i32> {
    match cmd {
        DocsCmd::Render { out } => {
            let markdown = admin
                .policy
                .render_tools_doc(pb::RenderToolsDocRequest {})
                .await?
                .into_inner()
                .markdown;
            match out {
                Some(path) => std::fs::write(&path, markdown)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => {
                    use std::io::Write as _;
                    let _ = write!(std::io::stdout().lock(), "{markdown}");
                }
            }
            Ok(0)
        }
        DocsCmd::Check { files } => {
            let mut drift = 0usize;
            let mut reports = Vec::new();
            for file in files {
                let text = read_input(&file)?;
                let name = file.display().to_string();
                let checked = admin
                    .policy
                    .check_document(pb::CheckDocumentRequest {
                        text,
                        name: name.clone(),
                    })
                    .await?
                    .into_inner();
                drift += checked.findings.len();
                for finding in checked.findings.iter().filter(|_| !json_out) {
                    out!("{name}:{}: {}", finding.line, describe(finding));
                }
                reports.push(json!({
                    "file": name,
                    "actual": checked.actual,
                    "findings": checked.findings.iter().map(finding_json).collect::<Vec<_>>(),
                }));
            }
            if json_out {
                out!("{}", pretty(&Value::Array(reports)));
            } else if drift == 0 {
                out!("no drift: every stated tool count and tools-table row matches the catalogue");
            }
            Ok(if drift == 0 { 0 } else { 1 })
        }
    }
}

/// One finding, for people: a stated count, or a tools-table row's column.
fn describe(finding: &pb::DriftFinding) -> String {
    if finding.tool.is_empty() {
        format!(
            "states {} tools (\"{}\"), the catalogue has {}",
            finding.stated, finding.text, finding.actual
        )
    } else {
        format!(
            "{}: {} says \"{}\", the catalogue says \"{}\"",
            finding.tool, finding.column, finding.text, finding.catalogue
        )
    }
}

/// One finding, for `--json`.
fn finding_json(f: &pb::DriftFinding) -> Value {
    if f.tool.is_empty() {
        json!({"line": f.line, "text": f.text, "stated": f.stated, "actual": f.actual})
    } else {
        json!({"line": f.line, "tool": f.tool, "column": f.column, "text": f.text, "catalogue": f.catalogue})
    }
}
