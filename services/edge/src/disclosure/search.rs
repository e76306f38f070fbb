//! Tool search for `capabilities {"query": …}` (ADR 0014): BM25F over the tools of one
//! (tenant, role, revision) registry, with field weights and English stemming.
//!
//! The index is built from the registry the caller sees, after role projection: a tool the
//! caller cannot see is not in it, so it can neither be found nor move another tool's rank or
//! the counts (document frequencies are this registry's). An action of a polymorphic tool that
//! the role may not use is not indexed either. The answer depends only on the registry and the
//! query, so every edge gives the same one.
//!
//! Fields and weights: the name (split at `_`, `-`, `.` and camelCase) weighs most, then the
//! title and the allowed actions (names and their descriptions), then the category, provider,
//! description and examples, then the argument names. A query word may also match a small list
//! of general synonyms ("remove" → "delete"), at a lower weight.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use crate::tool::EdgeTool;

/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// Most results one search returns.
pub const MAX_RESULTS: usize = 20;
/// Results when `limit` is not given.
pub const DEFAULT_RESULTS: usize = 5;

/// Fields, in this order: name, title, actions, category (and provider), the description's first
/// sentence, the rest of the description, examples, what the schema says of the arguments.
pub const FIELDS: usize = 8;

/// Weight and length normalisation (`b`) of each field, in field order.
const WEIGHTS: [f32; FIELDS] = [3.0, 2.0, 1.5, 1.2, 1.0, 1.0, 1.0, 0.2];
const B: [f32; FIELDS] = [0.5, 0.5, 0.75, 0.3, 0.5, 0.75, 0.75, 0.75];
/// How many tools of each ranking the fusion with a semantic ranking considers.
pub const FUSION_DEPTH: usize = 50;
/// The fusion's `k`: a larger one flattens the difference between neighbouring ranks.
pub const FUSION_K: f32 = 60.0;
/// Weight of a term reached through a synonym rather than typed.
const SYNONYM_WEIGHT: f32 = 0.6;

/// The ranker's parameters. [`Tuning::default`] is what the edge uses; the benchmark
/// (`benches/tool_search.rs`, `TOOL_SEARCH_TUNE=1`) searches others on the development half.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// Weight of each field, in field order.
    pub weights: [f32; FIELDS],
    /// Length normalisation of each field.
    pub b: [f32; FIELDS],
    /// Term-frequency saturation.
    pub k1: f32,
    /// Weight of a synonym's term (a typed word's is 1).
    pub synonym: f32,
    /// How much a tool matching more of the query's words gains: the score is multiplied by
    /// (matched words / query words) to this power.
    pub coordination: f32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            weights: WEIGHTS,
            b: B,
            k1: 0.8,
            synonym: SYNONYM_WEIGHT,
            coordination: 0.0,
        }
    }
}

/// General English synonyms of software vocabulary: a word a user types and the words tools
/// are described with. Not tuned to any catalogue.
const SYNONYMS: &[(&str, &[&str])] = &[
    ("remove", &["delete"]),
    ("erase", &["delete"]),
    ("drop", &["delete"]),
    ("forget", &["delete"]),
    ("destroy", &["delete"]),
    ("make", &["create"]),
    ("new", &["create"]),
    ("add", &["create"]),
    ("open", &["create", "get"]),
    ("start", &["create", "run"]),
    ("change", &["update", "edit"]),
    ("modify", &["update", "edit"]),
    ("edit", &["update"]),
    ("rename", &["move", "update"]),
    ("show", &["get", "list", "read"]),
    ("view", &["get", "read"]),
    ("see", &["get", "read"]),
    ("display", &["get", "list"]),
    ("fetch", &["get", "retrieve"]),
    ("retrieve", &["get"]),
    ("look", &["search", "find", "get"]),
    ("lookup", &["search", "get"]),
    ("find", &["search", "list"]),
    ("which", &["list"]),
    ("send", &["post", "message"]),
    ("tell", &["post", "message"]),
    ("reply", &["comment", "thread"]),
    ("run", &["execute"]),
    ("execute", &["run"]),
    ("trigger", &["run"]),
    ("launch", &["run", "create"]),
    ("picture", &["image", "screenshot"]),
    ("photo", &["image"]),
    ("folder", &["directory"]),
    ("big", &["size"]),
    ("large", &["size"]),
    ("small", &["size"]),
    ("repo", &["repository"]),
    ("pr", &["pull", "request"]),
    ("bug", &["issue"]),
    ("ticket", &["issue"]),
    ("note", &["comment", "observation"]),
    ("email", &["mail", "message"]),
    ("web", &["browser", "page"]),
    ("website", &["site", "page", "url"]),
    ("site", &["website", "page"]),
    ("link", &["url"]),
    ("url", &["link", "page"]),
    ("tab", &["page"]),
    ("log", &["logs", "console"]),
    ("error", &["failure", "issue"]),
    ("video", &["screencast", "record"]),
    ("record", &["create", "log"]),
    ("save", &["write", "create"]),
    ("store", &["write", "create"]),
    ("write", &["create", "update"]),
    ("download", &["export", "get"]),
    ("upload", &["file"]),
    ("type", &["fill", "text"]),
    ("enter", &["fill", "type"]),
    ("press", &["click", "key"]),
    ("choose", &["select"]),
    ("pick", &["select"]),
];

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "in", "on", "for", "and", "or", "with", "this", "that", "these",
    "those", "is", "are", "be", "been", "was", "were", "my", "me", "i", "you", "your", "it", "its",
    "from", "by", "at", "as", "all", "what", "please", "can", "could", "would", "should", "do",
    "does", "did", "so", "we", "our", "us", "them", "they", "there", "here", "into", "onto", "up",
    "about", "how", "when", "where", "who", "whom", "any", "some", "one", "use", "using", "tool",
    "tools", "then", "than", "if", "else", "via", "per", "will", "just",
];

fn stemmer() -> &'static Stemmer {
    static STEMMER: std::sync::OnceLock<Stemmer> = std::sync::OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Lowercase words of `text`: split at anything but letters and digits, and at camelCase
/// boundaries (`getUserProfile` → get, user, profile).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .flat_map(|w| {
            let mut parts = Vec::new();
            let mut current = String::new();
            let mut previous_lower = false;
            for c in w.chars() {
                if c.is_uppercase() && previous_lower && !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                previous_lower = c.is_lowercase() || c.is_ascii_digit();
                current.extend(c.to_lowercase());
            }
            parts.push(current);
            parts
        })
}

/// Whether a word says something about what a tool does: not a stopword, and not a number (a
/// number in a query is a value, an id or a count, and in a tool's text rarely its purpose).
fn keep(word: &str) -> bool {
    !STOPWORDS.contains(&word) && !word.chars().all(|c| c.is_ascii_digit())
}

/// The index terms of `text`: words without stopwords, stemmed.
fn terms(text: &str) -> Vec<String> {
    words(text)
        .filter(|w| keep(w))
        .map(|w| stemmer().stem(&w).into_owned())
        .collect()
}

/// The terms of a query, each with its weight: typed words at 1, their synonyms lower (a
/// synonym that is also typed keeps the typed weight).
fn query_terms(query: &str, synonym_weight: f32) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    let mut add = |term: String, weight: f32| match out.iter_mut().find(|(t, _)| *t == term) {
        Some((_, w)) => *w = w.max(weight),
        None => out.push((term, weight)),
    };
    for word in words(query).filter(|w| keep(w)) {
        if let Some((_, synonyms)) = SYNONYMS.iter().find(|(w, _)| *w == word) {
            for synonym in *synonyms {
                add(stemmer().stem(synonym).into_owned(), synonym_weight);
            }
        }
        add(stemmer().stem(&word).into_owned(), 1.0);
    }
    out
}

#[derive(Debug)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

/// One tool's allowed actions and the terms of each (its name and its branch's description).
#[derive(Debug, Default)]
struct Actions(Vec<(String, Vec<String>)>);

impl Actions {
    /// The actions a query's typed words point to: those whose terms hold one of them, not
    /// counting words that more than half of the actions share ("wiki" in a wiki tool's).
    fn matching(&self, query: &[(String, f32)]) -> Vec<String> {
        let most = (self.0.len() / 2).max(1);
        let telling =
            |q: &String| self.0.iter().filter(|(_, terms)| terms.contains(q)).count() <= most;
        self.0
            .iter()
            .filter(|(_, terms)| {
                query
                    .iter()
                    .any(|(q, w)| *w >= 1.0 && terms.contains(q) && telling(q))
            })
            .map(|(action, _)| action.clone())
            .collect()
    }
}

/// The search index of one registry's tools.
#[derive(Debug)]
pub struct SearchIndex {
    postings: HashMap<String, Vec<Posting>>,
    lengths: Vec<[u16; FIELDS]>,
    average: [f32; FIELDS],
    actions: Vec<Actions>,
}

/// One search result: the tool (an index into the registry's tools), its score and, for a
/// polymorphic tool, the allowed actions the query's words match.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Index of the tool in the registry's tools.
    pub tool: usize,
    /// BM25F score (higher is better).
    pub score: f32,
    /// Matching actions, in declaration order.
    pub actions: Vec<String>,
}

/// The allowed actions of a tool with their terms: each `oneOf` branch whose discriminator is
/// an allowed action.
fn actions_of(tool: &EdgeTool) -> Actions {
    let Some(set) = &tool.resolved.actions else {
        return Actions::default();
    };
    let branches = tool.resolved.input_schema["oneOf"].as_array();
    Actions(
        set.allowed
            .iter()
            .map(|action| {
                let description = branches
                    .into_iter()
                    .flatten()
                    .find(|b| b["properties"][&set.discriminator]["const"] == action.as_str())
                    .and_then(|b| b["description"].as_str())
                    .unwrap_or_default();
                let mut t = terms(action);
                t.extend(terms(description));
                (action.clone(), t)
            })
            .collect(),
    )
}

/// A description's lead sentence ([`super::lead_sentence`]: past headings and list markers) and
/// the rest of it.
fn first_sentence(description: &str) -> (&str, String) {
    let lead = super::lead_sentence(description);
    let rest = format!(
        "{} {}",
        &description[..lead.start],
        &description[lead.end..]
    );
    (&description[lead], rest)
}

/// The catalogue's tool names, for finding where one tool's description names another: each
/// name's word sequences of two words or more that end it (`hubspot_list_objects` and
/// `list_objects`), with the tools whose names end so.
#[derive(Debug, Default)]
struct Names(HashMap<String, Vec<u32>>);

impl Names {
    fn of(tools: &[EdgeTool]) -> Names {
        let mut names: HashMap<String, Vec<u32>> = HashMap::new();
        for (doc, tool) in tools.iter().enumerate() {
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            let parts: Vec<String> = words(&tool.resolved.name).collect();
            for start in 0..parts.len().saturating_sub(1) {
                names.entry(parts[start..].join("_")).or_default().push(doc);
            }
        }
        Names(names)
    }

    /// `text` without the identifiers in it that name another tool ("Use hubspot-list-objects
    /// first" in one tool's description says nothing of what that tool does). An identifier is
    /// a run of letters, digits, `_` and `-` holding a `_` or `-`; it names a tool when its words
    /// end that tool's name and do not end this one's (`own`).
    fn strip_references(&self, text: &str, own: u32) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(|c: char| c.is_alphanumeric()) {
            out.push_str(&rest[..start]);
            rest = &rest[start..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            let token = rest[..end].trim_end_matches(['_', '-']);
            let named = token.contains(['_', '-'])
                && self
                    .0
                    .get(&words(token).collect::<Vec<_>>().join("_"))
                    .is_some_and(|docs| !docs.contains(&own));
            if !named {
                out.push_str(token);
            }
            rest = &rest[token.len()..];
        }
        out.push_str(rest);
        out
    }
}

/// What a schema says about its arguments: their names, descriptions and enumerated values,
/// in its own properties and those of its branches and nested objects (depth-limited).
fn argument_text(schema: &Value) -> String {
    fn walk(schema: &Value, depth: usize, out: &mut Vec<String>) {
        if depth > 3 {
            return;
        }
        if let Some(properties) = schema["properties"].as_object() {
            for (name, property) in properties {
                out.push(name.clone());
                if let Some(description) = property["description"].as_str() {
                    out.push(description.to_owned());
                }
                for value in property["enum"].as_array().into_iter().flatten() {
                    if let Some(value) = value.as_str() {
                        out.push(value.to_owned());
                    }
                }
                walk(property, depth + 1, out);
                walk(&property["items"], depth + 1, out);
            }
        }
        for key in ["oneOf", "anyOf", "allOf"] {
            for branch in schema[key].as_array().into_iter().flatten() {
                walk(branch, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(schema, 0, &mut out);
    out.join(" ")
}

impl SearchIndex {
    /// Indexes `tools` (one registry's, already projected to the caller's role).
    pub fn build(tools: &[EdgeTool]) -> SearchIndex {
        let mut postings: HashMap<String, Vec<Posting>> = HashMap::new();
        let mut lengths = Vec::with_capacity(tools.len());
        let mut actions = Vec::with_capacity(tools.len());
        let names = Names::of(tools);
        for (doc, tool) in tools.iter().enumerate() {
            let r = &tool.resolved;
            let tool_actions = actions_of(tool);
            let action_text: Vec<String> =
                tool_actions.0.iter().flat_map(|(_, t)| t.clone()).collect();
            let category = format!("{} {}", r.category, r.provider.as_deref().unwrap_or(""));
            let own = u32::try_from(doc).unwrap_or(u32::MAX);
            let description = names.strip_references(&r.description, own);
            let (first, rest) = first_sentence(&description);
            let fields: [Vec<String>; FIELDS] = [
                terms(&r.name),
                terms(&r.title),
                action_text,
                terms(&category),
                terms(first),
                terms(&rest),
                terms(&r.examples.join(" ")),
                terms(&argument_text(&r.input_schema)),
            ];
            let mut counts: HashMap<&str, [u16; FIELDS]> = HashMap::new();
            let mut length = [0u16; FIELDS];
            for (f, field) in fields.iter().enumerate() {
                length[f] = u16::try_from(field.len()).unwrap_or(u16::MAX);
                for term in field {
                    let tf = &mut counts.entry(term.as_str()).or_default()[f];
                    *tf = tf.saturating_add(1);
                }
            }
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            for (term, tf) in counts {
                postings
                    .entry(term.to_owned())
                    .or_default()
                    .push(Posting { doc, tf });
            }
            lengths.push(length);
            actions.push(tool_actions);
        }
        let mut average = [1.0f32; FIELDS];
        if !lengths.is_empty() {
            for (f, avg) in average.iter_mut().enumerate() {
                let total: f32 = lengths.iter().map(|l| f32::from(l[f])).sum();
                *avg = (total / lengths.len() as f32).max(1.0);
            }
        }
        SearchIndex {
            postings,
            lengths,
            average,
            actions,
        }
    }

    /// The tools that match `query`, best first, at most `limit`; only tools for which `keep`
    /// holds (a category filter). Ties go to the earlier tool (name order).
    pub fn search(&self, query: &str, limit: usize, keep: impl Fn(usize) -> bool) -> Vec<Hit> {
        self.search_tuned(query, limit, keep, &Tuning::default())
    }

    /// [`SearchIndex::search`] with other parameters.
    pub fn search_tuned(
        &self,
        query: &str,
        limit: usize,
        keep: impl Fn(usize) -> bool,
        tuning: &Tuning,
    ) -> Vec<Hit> {
        let n = self.lengths.len() as f32;
        let query = query_terms(query, tuning.synonym);
        let typed = query.iter().filter(|(_, w)| *w >= 1.0).count().max(1) as f32;
        let mut scores: HashMap<u32, (f32, f32)> = HashMap::new();
        for (term, weight) in &query {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for posting in postings {
                let length = &self.lengths[posting.doc as usize];
                let tf: f32 = (0..FIELDS)
                    .map(|f| {
                        let b = tuning.b[f];
                        let norm = 1.0 - b + b * f32::from(length[f]) / self.average[f];
                        tuning.weights[f] * f32::from(posting.tf[f]) / norm
                    })
                    .sum();
                let entry = scores.entry(posting.doc).or_default();
                entry.0 += weight * idf * tf / (tuning.k1 + tf);
                if *weight >= 1.0 {
                    entry.1 += 1.0;
                }
            }
        }
        let mut ranked: Vec<(usize, f32)> = scores
            .into_iter()
            .map(|(doc, (score, matched))| {
                let coordination = (matched / typed).max(0.1).powf(tuning.coordination);
                (doc as usize, score * coordination)
            })
            .filter(|(doc, _)| keep(*doc))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        ranked
            .into_iter()
            .map(|(tool, score)| Hit {
                tool,
                score,
                actions: self.actions[tool].matching(&query),
            })
            .collect()
    }

    /// [`SearchIndex::search`] fused with a semantic ranking (tool indices, best first; see
    /// [`super::embed::fuse`]): the lexical ranking's first [`FUSION_DEPTH`] tools and the
    /// semantic one's, by reciprocal rank. A tool found only by meaning has score 0 here.
    pub fn search_fused(
        &self,
        query: &str,
        limit: usize,
        keep: impl Fn(usize) -> bool,
        semantic: &[usize],
        weight: f32,
    ) -> Vec<Hit> {
        let lexical = self.search_tuned(query, FUSION_DEPTH, &keep, &Tuning::default());
        let order: Vec<usize> = lexical.iter().map(|h| h.tool).collect();
        let semantic: Vec<usize> = semantic
            .iter()
            .copied()
            .filter(|&t| t < self.lengths.len() && keep(t))
            .take(FUSION_DEPTH)
            .collect();
        let terms = query_terms(query, Tuning::default().synonym);
        super::embed::fuse(&order, &semantic, FUSION_K, weight, limit)
            .into_iter()
            .map(|tool| Hit {
                tool,
                score: lexical
                    .iter()
                    .find(|h| h.tool == tool)
                    .map_or(0.0, |h| h.score),
                actions: self.actions[tool].matching(&terms),
            })
            .collect()
    }

    /// About how many bytes the index holds (postings, terms, lengths, action terms).
    pub fn approx_bytes(&self) -> usize {
        let postings: usize = self
            .postings
            .iter()
            .map(|(term, list)| {
                term.capacity() + 48 + list.capacity() * std::mem::size_of::<Posting>()
            })
            .sum();
        let actions: usize = self
            .actions
            .iter()
            .flat_map(|a| a.0.iter())
            .map(|(name, terms)| {
                name.capacity() + terms.iter().map(|t| t.capacity() + 24).sum::<usize>()
            })
            .sum();
        postings + actions + self.lengths.len() * std::mem::size_of::<[u16; FIELDS]>()
    }

    /// Tools indexed.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_separators_and_camel_case() {
        let w: Vec<String> = words("getUserProfile API-post-search slack_add_reaction").collect();
        assert_eq!(
            w,
            [
                "get", "user", "profile", "api", "post", "search", "slack", "add", "reaction"
            ]
        );
    }

    #[test]
    fn terms_are_stemmed_and_stopwords_dropped() {
        assert_eq!(terms("Listing the directories"), ["list", "directori"]);
        assert_eq!(terms("directory"), ["directori"]);
    }

    fn tool(name: &str, description: &str) -> EdgeTool {
        EdgeTool::new(tp_registry::ResolvedTool {
            name: name.into(),
            title: String::new(),
            description: description.into(),
            category: "crm".into(),
            provider: None,
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            annotations: tp_registry::Annotations::default(),
            executor: "crm".into(),
            examples: Vec::new(),
            client_capabilities: Vec::new(),
            actions: None,
            sunset: None,
        })
    }

    #[test]
    fn a_description_naming_another_tool_is_not_found_by_that_tools_words() {
        let tools = [
            tool(
                "crm_update_deals",
                "Updates deals. Use crm-list-contacts or list_contacts first; see crm_update_deals.",
            ),
            tool("crm_list_contacts", "Lists records of one kind."),
            tool("crm_export", "Exports the contacts."),
        ];
        let index = SearchIndex::build(&tools);
        let found: Vec<usize> = index
            .search("list contacts", 5, |_| true)
            .iter()
            .map(|h| h.tool)
            .collect();
        assert_eq!(
            found,
            [1, 2],
            "the update tool matched through its reference"
        );
        // Its own name in its description still counts, and so does a word that merely
        // appears in another's name.
        let names = Names::of(&tools);
        assert_eq!(
            names.strip_references(&tools[0].resolved.description, 0),
            "Updates deals. Use  or  first; see crm_update_deals."
        );
        assert_eq!(
            names.strip_references("list the contacts", 0),
            "list the contacts"
        );
    }

    #[test]
    fn synonyms_weigh_less_than_typed_words() {
        let q = query_terms("remove the delete", SYNONYM_WEIGHT);
        assert_eq!(q, [("delet".to_owned(), 1.0), ("remov".to_owned(), 1.0)]);
        let q = query_terms("remove", SYNONYM_WEIGHT);
        assert_eq!(
            q,
            [
                ("delet".to_owned(), SYNONYM_WEIGHT),
                ("remov".to_owned(), 1.0)
            ]
        );
    }
}
