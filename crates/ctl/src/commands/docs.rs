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
                for finding in &checked.findings {
                    if !json_out {
                        out!(
                            "{name}:{}: states {} tools (\"{}\"), the catalogue has {}",
                            finding.line,
                            finding.stated,
                            finding.text,
                            finding.actual
                        );
                    }
                }
                reports.push(json!({
                    "file": name,
                    "actual": checked.actual,
                    "findings": checked.findings.iter().map(|f| json!({"line": f.line, "text": f.text, "stated": f.stated, "actual": f.actual})).collect::<Vec<_>>(),
                }));
            }
            if json_out {
                out!("{}", pretty(&Value::Array(reports)));
            } else if drift == 0 {
                out!("no drift: every stated tool count matches the catalogue");
            }
            Ok(if drift == 0 { 0 } else { 1 })
        }
    }
}
