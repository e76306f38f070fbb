//! The admission lint: what a tool definition may not say to the models that read it.
//!
//! A tool's title, description, action descriptions, examples and the descriptions inside its
//! schemas are read by every model the tool is listed to. A definition that carries
//! instructions for the model, invisible characters, or asks for secrets is a poisoned tool
//! (the "tool poisoning" and "rug pull" attacks on MCP). Every rule is named; a rule either
//! **refuses** the write (nothing is stored) or **flags** it (the tool is stored with the
//! finding, which `toolplanectl tools get` shows and the catalogue keeps). See
//! `docs/adr/0012-governed-tool-definitions.md` and the operators' guide, "Admission lint".

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::error::{DomainResult, Violations};
pub use crate::tool::Finding;
use crate::tool::ToolDef;

/// What a rule does to the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The write is refused (`INVALID_ARGUMENT`, the rule named in the field violation).
    Refuse,
    /// The tool is admitted and the finding kept with it.
    Flag,
}

/// The rules, their severity and the sentence an operator reads.
pub const RULES: [(&str, Severity, &str); 5] = [
    (
        "hidden-unicode",
        Severity::Refuse,
        "invisible or direction-changing characters hide text from the people who review a tool while models still read it",
    ),
    (
        "model-instruction",
        Severity::Refuse,
        "a description says what the tool does; instructions aimed at the model (to ignore others, to hide things from the user, to read files) are how tools are poisoned",
    ),
    (
        "secret-field",
        Severity::Refuse,
        "an argument that asks for a secret must say what it is for in its schema description (then it is admitted and flagged); credentials belong in the executor's configuration, not in what a model types",
    ),
    (
        "url-in-description",
        Severity::Flag,
        "a link in a description invites the model to fetch or repeat it",
    ),
    (
        "email-in-description",
        Severity::Flag,
        "an address in a description invites the model to send to it",
    ),
];

/// The severity of `rule` (a `secret-field` finding on a described argument is a flag).
fn severity(finding: &Finding) -> Severity {
    if finding.rule == "secret-field" && finding.found.ends_with("(described)") {
        return Severity::Flag;
    }
    RULES
        .iter()
        .find(|(name, ..)| *name == finding.rule)
        .map_or(Severity::Refuse, |(_, severity, _)| *severity)
}

/// The sentence of `rule`.
fn reason(rule: &str) -> &'static str {
    RULES
        .iter()
        .find(|(name, ..)| *name == rule)
        .map_or("", |(_, _, reason)| reason)
}

/// Lints a validated definition: `Err` (every refusal as a field violation naming its rule)
/// when any rule refuses it, else the flags to keep with the tool.
pub fn admit(def: &ToolDef) -> DomainResult<Vec<Finding>> {
    let findings = definition(def);
    let mut refused = Violations::default();
    let mut flags = Vec::new();
    for finding in findings {
        match severity(&finding) {
            Severity::Refuse => refused.add(
                finding.field.clone(),
                format!(
                    "refused by the admission lint, rule {}: {} ({})",
                    finding.rule,
                    finding.found,
                    reason(&finding.rule)
                ),
            ),
            Severity::Flag => flags.push(finding),
        }
    }
    refused.finish()?;
    Ok(flags)
}

/// Every finding of every rule in a definition, refusals and flags alike, in field order.
pub fn definition(def: &ToolDef) -> Vec<Finding> {
    let mut texts: Vec<(String, &str)> = vec![
        ("tool.title".into(), def.title.as_str()),
        ("tool.description".into(), def.description.as_str()),
    ];
    for (i, example) in def.examples.iter().enumerate() {
        texts.push((format!("tool.examples[{i}]"), example));
    }
    if let Some(poly) = &def.polymorphism {
        for action in &poly.actions {
            texts.push((
                format!("tool.polymorphism.actions.{}.description", action.name),
                &action.description,
            ));
        }
    }
    let mut findings = Vec::new();
    for (field, text) in &texts {
        prose(field, text, &mut findings);
    }
    schema("tool.input_schema", &def.input_schema, &mut findings);
    if let Some(output) = &def.output_schema {
        schema("tool.output_schema", output, &mut findings);
    }
    secrets("tool.input_schema", &def.input_schema, &mut findings);
    findings
}

/// The rules for text a model reads as prose.
fn prose(field: &str, text: &str, findings: &mut Vec<Finding>) {
    hidden(field, text, findings);
    let mut add = |rule: &str, found: String| {
        findings.push(Finding {
            rule: rule.into(),
            field: field.into(),
            found,
        });
    };
    let folded = fold(text);
    for pattern in INSTRUCTIONS.iter() {
        if let Some(m) = pattern.find(&folded) {
            add("model-instruction", format!("{:?}", m.as_str()));
        }
    }
    if let Some(m) = URL.find(text) {
        add("url-in-description", format!("{:?}", m.as_str()));
    }
    if let Some(m) = EMAIL.find(text) {
        add("email-in-description", format!("{:?}", m.as_str()));
    }
}

/// Invisible and direction-changing characters anywhere in `text`.
fn hidden(field: &str, text: &str, findings: &mut Vec<Finding>) {
    let mut previous_visible = false;
    let found: Vec<String> = text
        .chars()
        .filter(|&c| {
            // U+FE0F after a visible character is the emoji presentation selector; anything
            // else from the selector blocks smuggles bytes.
            let hidden = is_hidden(c) && !(c == '\u{FE0F}' && previous_visible);
            previous_visible = !is_hidden(c);
            hidden
        })
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    if !found.is_empty() {
        let mut shown: Vec<String> = found.iter().take(5).cloned().collect();
        if found.len() > 5 {
            shown.push(format!("and {} more", found.len() - 5));
        }
        findings.push(Finding {
            rule: "hidden-unicode".into(),
            field: field.into(),
            found: shown.join(", "),
        });
    }
}

/// Characters that render as nothing or reorder what is around them.
fn is_hidden(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
            | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
            | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB | 0x1D173..=0x1D17A | 0xE0000..=0xE007F
            | 0xE0100..=0xE01EF
    )
}

/// Lower case, typographic apostrophes and quotes made plain, runs of white space one space:
/// what the instruction patterns are written against.
fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        let c = match c {
            '\u{2018}' | '\u{2019}' | '\u{02BC}' => '\'',
            c if c.is_whitespace() => ' ',
            c => c,
        };
        if c == ' ' {
            if !space {
                out.push(' ');
            }
            space = true;
            continue;
        }
        space = false;
        out.extend(c.to_lowercase());
    }
    out
}

/// Phrases aimed at the model rather than describing the tool (matched on [`fold`]ed text).
static INSTRUCTIONS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // Overriding the rest of the prompt.
        r"\b(ignore|disregard|forget|override)( all| any)?( of)?( the| your)? (previous|prior|above|earlier|preceding|other|system|original) (instructions|prompts?|rules|messages|directions|guidelines)",
        r"\bnew (system )?instructions ?:",
        r"\b(system prompt|developer message)\b",
        r"\byou are now\b",
        // Hiding the tool's behaviour from the person using it.
        r"\b(do not|don't|never|must not) (tell|inform|notify|alert|show|mention (this|it) to) the user",
        r"\b(without|before) (telling|informing|notifying|alerting|asking) the user",
        r"\b(do not|don't|never) mention (this|that|it)\b",
        r"\b(hide|conceal) (this|it|that) from the user",
        r"\bthe user (must|should) not (know|see|be told)",
        // Tags prompt injections wrap themselves in.
        r"</?(important|system|instructions?|secret|hidden|admin)>",
        r"\[/?(system|inst)\]|<\|im_start\|>|<\|system\|>",
        // Sending the model after files or other tools.
        r"\b(read|open|cat|include|send|attach|pass|upload)\b[^.]{0,60}(~/\.|\bid_rsa\b|\.ssh/|\.env\b|mcp\.json|\.aws/credentials)",
        r"\b(instead of|rather than) (using |calling )?(any|the|every) other tools?\b",
        r"\bbefore (using|calling) (any|this|the) (other )?tools?,? (you )?(must|should|first)\b",
    ]
    .iter()
    .map(|pattern| Regex::new(pattern).expect("the lint's patterns compile"))
    .collect()
});

/// A link a model could fetch.
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(https?|ftp|file|data|javascript)://[^\s)>\]]+|\bwww\.[a-z0-9-]+\.[a-z]{2,}[^\s)>\]]*")
        .expect("the URL pattern compiles")
});

/// An e-mail address.
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}\b")
        .expect("the e-mail pattern compiles")
});

/// Schema keywords whose strings are prose a model reads.
const PROSE_KEYWORDS: [&str; 2] = ["description", "title"];

/// The prose rules on every `description` and `title` inside a schema; the hidden-character
/// rule on every other string (keys included).
fn schema(path: &str, value: &Value, findings: &mut Vec<Finding>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                let here = format!("{path}.{key}");
                hidden(&here, key, findings);
                match item {
                    Value::String(text) if PROSE_KEYWORDS.contains(&key.as_str()) => {
                        prose(&here, text, findings);
                    }
                    _ => schema(&here, item, findings),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                schema(&format!("{path}[{i}]"), item, findings);
            }
        }
        Value::String(text) => hidden(path, text, findings),
        _ => {}
    }
}

/// Words that, as a whole segment of an argument's name, ask for a secret.
const SECRET_WORDS: [&str; 15] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "sshkey",
    "secretkey",
    "accesskey",
    "clientsecret",
    "credential",
    "credentials",
    "cookie",
    "otp",
];

/// Arguments (at any depth of `properties`) whose names ask for a secret.
fn secrets(path: &str, value: &Value, findings: &mut Vec<Finding>) {
    let Value::Object(map) = value else {
        if let Value::Array(items) = value {
            for (i, item) in items.iter().enumerate() {
                secrets(&format!("{path}[{i}]"), item, findings);
            }
        }
        return;
    };
    for (key, item) in map {
        let here = format!("{path}.{key}");
        if key == "properties"
            && let Value::Object(properties) = item
        {
            for (name, property) in properties {
                let field = format!("{here}.{name}");
                if asks_for_secret(name) {
                    let described = property
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| d.trim().len() >= 12);
                    findings.push(Finding {
                        rule: "secret-field".into(),
                        field: field.clone(),
                        found: format!(
                            "{name:?} {}",
                            if described {
                                "(described)"
                            } else {
                                "(no description)"
                            }
                        ),
                    });
                }
                secrets(&field, property, findings);
            }
        } else {
            secrets(&here, item, findings);
        }
    }
}

/// Whether an argument name asks for a secret: `password`, `github_token`, `sshKey`,
/// `api-key`; not `tokenizer` or `pinned`.
fn asks_for_secret(name: &str) -> bool {
    // Split camelCase and separators into lower-case segments.
    let mut segments: Vec<String> = vec![String::new()];
    let mut previous_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c == ' ' {
            segments.push(String::new());
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            segments.push(String::new());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        if let Some(last) = segments.last_mut() {
            last.extend(c.to_lowercase());
        }
    }
    segments.retain(|s| !s.is_empty());
    let single = segments.iter().any(|s| SECRET_WORDS.contains(&s.as_str()));
    let joined = segments
        .windows(2)
        .any(|pair| SECRET_WORDS.contains(&format!("{}{}", pair[0], pair[1]).as_str()));
    single || joined
}

#[cfg(test)]
mod tests;
