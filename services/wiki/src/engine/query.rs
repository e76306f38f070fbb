//! Query: an answer whose every sentence is a cited sentence of a source — the newest claim for
//! a question about one attribute of one entity, the best-matching sentences otherwise — or a
//! refusal that cites nothing, when the question names something the wiki has no page for, or
//! nothing in it supports the question's terms. A question about one entity is answered only
//! from sentences that name that entity.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::question::{self, Question};
use super::{Wiki, WikiError, WikiResult, root};
use crate::index::{FoundClaim, Passage, TenantIndex};
use crate::page::Page;
use crate::storage::Batch;
use crate::synonyms::Synonyms;
use crate::text;

/// Most sentences an answer quotes.
const ANSWER_SENTENCES: usize = 5;
/// An answer keeps sentences scoring at least this share of the best one.
const KEEP_RATIO: f64 = 0.5;
/// Passages considered for a general answer.
const CANDIDATES: usize = 40;

/// What an answer is made of: sentence, citation, title of its page, the page's path.
type Chosen = (String, String, String, String);

/// Why a question is refused, or the sentences that answer it.
enum Outcome {
    Refused(String),
    Answer {
        chosen: Vec<Chosen>,
        fact: Option<Value>,
        ranked: Vec<(String, f64)>,
    },
}

/// Refusal text when nothing in the wiki supports the question.
const NOTHING: &str = "The wiki has nothing that answers this question yet. Ingest a source that covers it, then ask again.";

fn source_of(cite: &str) -> String {
    cite.trim_start_matches("[[")
        .split('#')
        .next()
        .unwrap_or_default()
        .trim_end_matches("]]")
        .to_owned()
}

/// The answer from claims: the newest value first (with its date), then any other value other
/// sources give (older, or disagreeing), each cited.
fn from_claims(claims: &[FoundClaim], attribute: &str) -> Option<(Vec<Chosen>, Value)> {
    let newest = claims.first()?;
    let mut chosen: Vec<Chosen> = vec![(
        newest.text.clone(),
        newest.cite.clone(),
        String::new(),
        source_of(&newest.cite),
    )];
    let mut values: Vec<String> = vec![newest.claim.value.clone()];
    for other in claims.iter().skip(1) {
        if chosen.len() >= 3 {
            break;
        }
        if values.contains(&other.claim.value) || chosen.iter().any(|c| c.0 == other.text) {
            continue;
        }
        values.push(other.claim.value.clone());
        chosen.push((
            other.text.clone(),
            other.cite.clone(),
            String::new(),
            source_of(&other.cite),
        ));
    }
    let fact = json!({
        "entity": newest.claim.entity,
        "attribute": attribute,
        "value": newest.claim.value,
        "unit": newest.claim.unit,
        "date": super::pages::show_date(newest.claim.date),
        "cite": newest.cite,
        "other_values": claims.len() - 1,
    });
    Some((chosen, fact))
}

/// The claims of entity `key` a question asks for: those whose attribute and qualifiers are
/// all words of the question (or of the attribute it asks by its shape: "how many people" asks
/// for the population). The most specific group wins; within it, newest first.
fn claims_asked(
    index: &TenantIndex,
    key: &str,
    question: &Question,
    others: &[&str],
    synonyms: &Synonyms,
) -> WikiResult<Vec<FoundClaim>> {
    // Content words, stemmed: "melts at" asks for "melt", like "melting point" and "melt?".
    let words = |text: &str| -> BTreeSet<String> {
        let content: Vec<String> = text::words(text)
            .into_iter()
            .filter(|w| !text::is_stopword(w))
            .collect();
        index.tokens(&content.join(" ")).into_iter().collect()
    };
    // The tenant's synonyms: a question about "staff" asks for a "head count" it says
    // means staff, and a claim's attribute is what the table makes of it.
    let mut asked = words(&synonyms.expand(&question.text));
    if let Some(attribute) = &question.attribute {
        asked.extend(words(&synonyms.attribute(attribute)));
    }
    let mut best: Option<(usize, String, Vec<String>)> = None;
    let all = index.claims_of(key)?;
    for found in &all {
        let mut wanted = words(&synonyms.attribute(&found.claim.attribute));
        if wanted.is_empty() {
            continue;
        }
        for qualifier in &found.claim.qualifiers {
            wanted.extend(words(qualifier));
        }
        if !wanted.is_subset(&asked) {
            continue;
        }
        // The question's other names must be what the claim is about beyond its entity
        // ("the Google Ads budget of Acme": a claim of Acme whose attribute says Google Ads).
        if !others.iter().all(|other| words(other).is_subset(&wanted)) {
            continue;
        }
        let group = (
            wanted.len(),
            synonyms.attribute(&found.claim.attribute).into_owned(),
            found.claim.qualifiers.clone(),
        );
        if best.as_ref().is_none_or(|b| group.0 > b.0) {
            best = Some(group);
        }
    }
    let Some((_, attribute, qualifiers)) = best else {
        return Ok(Vec::new());
    };
    // "Google Ads" (a change said in a call) is the same fact as "Google Ads budget" (a
    // brief's field): an attribute written with most of the same words joins the group.
    Ok(all
        .into_iter()
        .filter(|c| {
            let own = synonyms.attribute(&c.claim.attribute);
            c.claim.qualifiers == qualifiers
                && crate::claims::same_attribute(&own, &attribute)
                && words(&own).is_subset(&asked)
        })
        .collect())
}

/// The best sentences among `passages` for the question's terms.
fn from_passages(
    index: &TenantIndex,
    question: &str,
    passages: Vec<Passage>,
    names: &[String],
    synonyms: &Synonyms,
) -> Outcome {
    // Content terms, stemmed as the index stems them ("investing" meets "investment").
    // Content words, stemmed once, by the index's own stemmer.
    let stems = |text: &str| -> BTreeSet<String> {
        let content: Vec<String> = text::words(text)
            .into_iter()
            .filter(|w| {
                w.len() > 2 && !text::is_stopword(w) && !w.chars().all(|c| c.is_ascii_digit())
            })
            .collect();
        index.tokens(&content.join(" ")).into_iter().collect()
    };
    // The terms that must be supported: the question's content terms other than the names'
    // (those are what the passages were chosen by).
    let name_terms: BTreeSet<String> = names.iter().flat_map(|n| stems(n)).collect();
    let vocabulary = crate::vocabulary::vocabulary();
    let terms: BTreeSet<String> = stems(&synonyms.expand(&vocabulary.with_term_synonyms(question)))
        .into_iter()
        .filter(|t| !name_terms.contains(t))
        .collect();
    let needed = terms.len().div_ceil(3).max(usize::from(!terms.is_empty()));
    let newest = passages.iter().map(|p| p.date).max().unwrap_or(0);
    let mut scored: Vec<(f64, Passage)> = Vec::new();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    // A "when" question is answered by sentences that carry a date.
    let asks_when = question
        .split_whitespace()
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("when"));
    for passage in passages {
        // A sentence is read with its document's title ("*May 6, 2021*" under "Django
        // 3.2.2 release notes" says when it was released).
        let sentence_terms = stems(&synonyms.expand(&vocabulary.with_term_synonyms(&passage.text)));
        let in_context: BTreeSet<String> = sentence_terms
            .union(&stems(&passage.title))
            .cloned()
            .collect();
        let shared: Vec<String> = terms.intersection(&in_context).cloned().collect();
        if shared.len() < needed {
            continue;
        }
        let dated = asks_when
            && (crate::text::dates::find(&passage.text).is_some()
                || crate::claims::stated_date(&passage.text) > 0);
        covered.extend(shared.iter().cloned());
        let length = stems(&passage.text).len().max(1) as f64;
        // Newer sources first among equally good sentences.
        let recency = if newest > 0 && passage.date == newest {
            0.05
        } else {
            0.0
        };
        let when = if dated { 1.0 } else { 0.0 };
        // Words the sentence itself shares count fully; those only its title shares, half.
        let own = terms.intersection(&sentence_terms).count() as f64;
        let from_title = shared.len() as f64 - own;
        let score = (own + from_title * 0.5) / length.sqrt()
            + f64::from(passage.score) * 0.01
            + recency
            + when;
        scored.push((score, passage));
    }
    if scored.is_empty() || covered.len() < terms.len().div_ceil(2) {
        return Outcome::Refused(NOTHING.to_owned());
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cite.cmp(&b.1.cite)));
    let mut ranked_pages: Vec<(String, f64)> = Vec::new();
    for (score, passage) in &scored {
        let link = passage.path.trim_end_matches(".md").to_owned();
        if !ranked_pages.iter().any(|(p, _)| *p == link) {
            ranked_pages.push((link, *score));
        }
    }
    let mut seen = BTreeSet::new();
    // Sentences far below the best do not pad the answer.
    let best = scored.first().map_or(0.0, |(score, _)| *score);
    let chosen: Vec<Chosen> = scored
        .into_iter()
        .filter(|(score, _)| *score >= best * KEEP_RATIO)
        .filter(|(_, p)| seen.insert(p.text.clone()))
        .take(ANSWER_SENTENCES)
        .map(|(_, p)| {
            let page = p.path.trim_end_matches(".md").to_owned();
            (p.text, p.cite, p.title, page)
        })
        .collect();
    Outcome::Answer {
        chosen,
        fact: None,
        ranked: ranked_pages,
    }
}

/// Names with no page that sources still write (an entity past a per-ingest cap): they
/// filter passages by their text. Every name must resolve: "the budget of <a client never
/// ingested>" is refused, not answered from the clients the wiki knows.
fn written_names(
    index: &TenantIndex,
    unknown: &[&question::Name],
) -> WikiResult<Result<Vec<String>, Outcome>> {
    let mut written: Vec<String> = Vec::new();
    for name in unknown {
        let tokens = index.tokens(&name.text);
        let mentioned = index
            .passages(&tokens, &[], 20)?
            .into_iter()
            .any(|p| super::pages::mentions(&p.text, &name.text));
        if !mentioned {
            return Ok(Err(Outcome::Refused(format!(
                "The wiki has no page about {} and no source that mentions it, so it cannot answer this question. Ingest a source about it, then ask again.",
                name.text
            ))));
        }
        written.push(name.text.clone());
    }
    Ok(Ok(written))
}

/// Claims are a precision layer: the newest value of the asked attribute (and of the
/// attributes written with the same words) of the first named entity that has one.
fn newest_fact(
    index: &TenantIndex,
    question: &Question,
    keys: &[String],
    synonyms: &Synonyms,
) -> WikiResult<Option<(Vec<Chosen>, Value)>> {
    for key in keys {
        let others: Vec<&str> = question
            .names
            .iter()
            .filter(|n| n.key.as_deref().is_some_and(|k| k != key))
            .map(|n| n.text.as_str())
            .collect();
        let claims = claims_asked(index, key, question, &others, synonyms)?;
        if let Some(first) = claims.first() {
            let attribute = first.claim.attribute.clone();
            return Ok(from_claims(&claims, &attribute));
        }
    }
    Ok(None)
}

/// A named entity's own documents (their titles name it) speak for it: a later document's
/// "fixed a regression in 4.2.8" does not say what 4.2.8 fixed. Other documents answer only
/// when its own do not.
fn from_own_first(
    index: &TenantIndex,
    question: &Question,
    known: &[&question::Name],
    passages: Vec<Passage>,
    synonyms: &Synonyms,
) -> Outcome {
    let names: Vec<String> = question.names.iter().map(|n| n.text.clone()).collect();
    let own: Vec<Passage> = passages
        .iter()
        .filter(|p| {
            known
                .iter()
                .any(|n| super::pages::mentions(&p.title, &n.text))
        })
        .cloned()
        .collect();
    match own.is_empty() || own.len() == passages.len() {
        true => from_passages(index, &question.text, passages, &names, synonyms),
        false => match from_passages(index, &question.text, own, &names, synonyms) {
            answered @ Outcome::Answer { .. } => answered,
            Outcome::Refused(_) => from_passages(index, &question.text, passages, &names, synonyms),
        },
    }
}

/// Decides the answer of `question`.
fn answer(index: &TenantIndex, question: &Question, synonyms: &Synonyms) -> WikiResult<Outcome> {
    // Names written as names narrow the answer; a lower-case word that happens to name an
    // entity does only when nothing else is named.
    let firm = question.names.iter().any(|n| n.key.is_some() && !n.soft);
    let known: Vec<&question::Name> = question
        .names
        .iter()
        .filter(|n| n.key.is_some() && (!firm || !n.soft))
        .collect();
    let unknown: Vec<&question::Name> = question.names.iter().filter(|n| n.key.is_none()).collect();
    let keys: Vec<String> = known.iter().filter_map(|n| n.key.clone()).collect();
    let written = match written_names(index, &unknown)? {
        Ok(written) => written,
        Err(refused) => return Ok(refused),
    };
    let from_facts = newest_fact(index, question, &keys, synonyms)?;
    // Passages are the backbone: among those concerning every named entity (else any of
    // them), the best for the question's words.
    let tokens = index.tokens(
        &synonyms.expand(&crate::vocabulary::vocabulary().with_term_synonyms(&question.text)),
    );
    let limit = if keys.is_empty() {
        CANDIDATES
    } else {
        CANDIDATES * 2
    };
    let mut passages = if keys.len() > 1 {
        index.passages_of_all(&tokens, &keys, limit)?
    } else {
        Vec::new()
    };
    if passages.is_empty() {
        passages = index.passages(&tokens, &keys, limit)?;
    }
    if !written.is_empty() {
        passages.retain(|p| {
            written.iter().any(|w| super::pages::mentions(&p.text, w))
                || !keys.is_empty() && p.keys.iter().any(|k| keys.contains(k))
        });
    }
    let found = from_own_first(index, question, &known, passages, synonyms);
    let Some((mut chosen, fact)) = from_facts else {
        return Ok(found);
    };
    let mut ranked: Vec<(String, f64)> = chosen.iter().map(|c| (c.3.clone(), 1.0)).collect();
    if let Outcome::Answer {
        chosen: more,
        ranked: more_ranked,
        ..
    } = found
    {
        for c in more {
            if chosen.len() >= ANSWER_SENTENCES {
                break;
            }
            if !chosen.iter().any(|have| have.0 == c.0) {
                chosen.push(c);
            }
        }
        for (page, score) in more_ranked {
            if !ranked.iter().any(|(p, _)| *p == page) {
                ranked.push((page, score));
            }
        }
    }
    Ok(Outcome::Answer {
        chosen,
        fact: Some(fact),
        ranked,
    })
}

fn render(format: &str, chosen: &[Chosen]) -> String {
    match format {
        "comparison_table" => {
            let mut out = String::from("| Page | Finding | Source |\n|---|---|---|\n");
            for (sentence, cite, title, page) in chosen {
                let title = if title.is_empty() { page } else { title };
                out.push_str(&format!(
                    "| {} | {} | {cite} |\n",
                    title.replace('|', "\\|"),
                    sentence.replace('|', "\\|")
                ));
            }
            out
        }
        "summary_with_sources" => {
            let mut numbers: HashMap<&String, usize> = HashMap::new();
            let mut sources: Vec<&String> = Vec::new();
            let mut paragraph = Vec::new();
            for (sentence, cite, _, _) in chosen {
                let n = *numbers.entry(cite).or_insert_with(|| {
                    sources.push(cite);
                    sources.len()
                });
                paragraph.push(format!("{sentence} [{n}]"));
            }
            let mut out = paragraph.join(" ");
            out.push_str("\n\nSources:\n");
            for (i, cite) in sources.iter().enumerate() {
                out.push_str(&format!("[{}] {cite}\n", i + 1));
            }
            out
        }
        _ => chosen
            .iter()
            .map(|(sentence, cite, _, _)| format!("- {sentence} {cite}\n"))
            .collect(),
    }
}

impl Wiki {
    /// Answers a question from the wiki with a citation on every sentence, or refuses.
    pub async fn query(
        &self,
        tenant: &str,
        question: &str,
        max_pages: usize,
        format: &str,
        persist: bool,
    ) -> WikiResult<Value> {
        if question.trim().is_empty() || question.chars().count() > super::MAX_QUESTION {
            return Err(WikiError::Invalid(format!(
                "question must be 1 to {} characters",
                super::MAX_QUESTION
            )));
        }
        if !(1..=20).contains(&max_pages) {
            return Err(WikiError::Invalid(
                "max_pages must be between 1 and 20".into(),
            ));
        }
        if !["markdown", "comparison_table", "summary_with_sources"].contains(&format) {
            return Err(WikiError::Invalid(format!(
                "unknown output_format {format:?}"
            )));
        }
        let index = self.fresh_index(tenant).await?;
        let synonyms = self.synonyms(tenant).await?;
        let analysed = question::analyse(question, &index, &synonyms);
        let outcome = answer(&index, &analysed, &synonyms)?;
        let (answered, text, chosen, fact, ranked, refusal) = match outcome {
            Outcome::Refused(reason) => (
                false,
                reason.clone(),
                Vec::new(),
                Value::Null,
                Vec::new(),
                Some(reason),
            ),
            Outcome::Answer {
                chosen,
                fact,
                ranked,
            } => {
                let text = render(format, &chosen);
                (
                    true,
                    text,
                    chosen,
                    fact.unwrap_or(Value::Null),
                    ranked,
                    None,
                )
            }
        };
        let citations: Vec<&String> = chosen.iter().map(|c| &c.1).collect();
        let mut persisted = Value::Null;
        if persist && answered {
            persisted = json!(self.persist(tenant, question, &text, &chosen).await?);
        }
        let pages: Vec<Value> = ranked
            .iter()
            .take(max_pages)
            .map(|(p, s)| json!({"path": format!("wiki/{p}.md"), "score": (s * 1000.0).round() / 1000.0}))
            .collect();
        Ok(json!({
            "answered": answered,
            "answer": text,
            "format": format,
            "citations": citations,
            "fact": fact,
            "refusal": refusal,
            "names": analysed.names.iter().map(|n| json!({"name": n.text, "known": n.key.is_some()})).collect::<Vec<_>>(),
            "pages": pages,
            "persisted": persisted,
            "cost_usd": 0.0,
        }))
    }

    /// Files an answer under `outputs/`.
    async fn persist(
        &self,
        tenant: &str,
        question: &str,
        answer: &str,
        chosen: &[Chosen],
    ) -> WikiResult<String> {
        let lease = self.storage.lock(tenant).await?;
        let index = self.fresh_index(tenant).await?;
        let today = self.today();
        let path = format!("outputs/{}.md", text::slug(question));
        let mut page = Page::new(path.clone(), question, "output", &today);
        page.meta.insert("question".into(), json!(question));
        page.meta.insert(
            "summary".into(),
            json!(chosen.first().map(|c| c.0.clone()).unwrap_or_default()),
        );
        page.meta.insert(
            "sources".into(),
            json!(
                chosen
                    .iter()
                    .map(|c| source_of(&c.1))
                    .collect::<BTreeSet<_>>()
            ),
        );
        page.meta.insert("aliases".into(), json!([]));
        page.body = format!("# {}\n\n{answer}\n", crate::page::label(question));
        let mut receipts = Vec::new();
        let mut batch = Batch::default();
        if self
            .write_page(tenant, &page, &mut receipts, &mut batch)
            .await?
        {
            batch.put(
                format!("{}/wiki/index.md", root(tenant)),
                Wiki::render_index(index.catalogue()?, std::slice::from_ref(&page)),
            );
            self.append_log(tenant, "query", question, &mut batch)
                .await?;
            self.commit(tenant, &lease, &index, batch, vec![page], Vec::new())
                .await?;
        }
        lease.release().await;
        Ok(format!("wiki/{path}"))
    }
}
