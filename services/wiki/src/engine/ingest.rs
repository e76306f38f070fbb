//! Ingest: a source becomes a source page (summary, entities, concepts, claims, every sentence
//! citable), updates to the pages of the entities and concepts it names, an index entry, a log
//! line, the next revision — all in one commit — and the search index at that revision.
//! Only the pages the source touches are read, whatever the size of the wiki.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::pages::{entity_claim, keys_in, page_aliases, source_body, write_facts};
use super::{Progress, Receipt, Source, Wiki, WikiError, WikiResult, hash, root};
use crate::claims::{self, Claim, key};
use crate::page::Page;
use crate::storage::Batch;
use crate::text;

/// Sentences in a source summary.
const SUMMARY_SENTENCES: usize = 3;
/// Concept pages made per source.
const CONCEPTS_PER_SOURCE: usize = 5;
/// Dated mentions an entity or concept page keeps per source.
const MENTIONS_PER_SOURCE: usize = 3;

/// What ingest reads from a source's text (computed off the request threads).
#[derive(Debug)]
pub(crate) struct Analysis {
    pub doc_type: String,
    pub sentences: Vec<String>,
    pub summary: Vec<(usize, String)>,
    pub entities: Vec<String>,
    pub aliases: Vec<(String, String)>,
    pub concepts: Vec<String>,
    pub claims: Vec<Claim>,
    pub date: u32,
    /// The date the document speaks as of, when it says (or the caller does).
    pub as_of: Option<u32>,
    /// The entity the document is about, when it has one (its passages concern it even
    /// where they say "the company" or "the country").
    pub subject: Option<String>,
}

/// The subject of a document: the entity its label names, else the one its first sentence
/// opens with (both sure), else the one it names most, twice at least (a guess).
fn subject(label: &str, entities: &[String], sentences: &[String]) -> Option<(String, bool)> {
    if let Some(named) = entities
        .iter()
        .filter(|e| super::pages::mentions(label, e))
        .max_by_key(|e| e.len())
    {
        return Some((named.clone(), true));
    }
    if let Some(first) = sentences.first() {
        let opening = first
            .trim_start()
            .strip_prefix("The ")
            .unwrap_or_else(|| first.trim_start());
        if let Some(opener) = entities
            .iter()
            .filter(|e| opening.starts_with(e.as_str()))
            .max_by_key(|e| e.len())
        {
            return Some((opener.clone(), true));
        }
    }
    entities
        .iter()
        .map(|e| {
            (
                sentences
                    .iter()
                    .filter(|s| super::pages::mentions(s, e))
                    .count(),
                e,
            )
        })
        .filter(|(count, _)| *count >= 2)
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
        .map(|(_, e)| (e.clone(), false))
}

pub(crate) fn analyse(
    source_text: &str,
    label: &str,
    doc_type: &str,
    max_entities: usize,
    as_of: Option<u32>,
    declared: &[String],
) -> Analysis {
    // Structure first: markup, front matter, headers and quoted mail out; the as-of date and
    // the declared subjects read.
    let prepared = text::document::prepare(source_text, as_of, declared);
    let text = prepared.text.as_str();
    let doc_type = if doc_type.is_empty() || doc_type == "auto" {
        text::classify(text).to_owned()
    } else {
        doc_type.to_owned()
    };
    let sentences = text::sentences(text);
    let summary = text::summary(&sentences, SUMMARY_SENTENCES);
    let (entities, aliases) = document_entities(&sentences, label, &prepared);
    let (subject, sure) = match prepared.subjects.first() {
        Some(declared) => (Some(declared.clone()), true),
        None => match subject(
            prepared.title.as_deref().unwrap_or(label),
            &entities,
            &sentences,
        )
        .or_else(|| subject(label, &entities, &sentences))
        {
            Some((found, sure)) => (Some(found), sure),
            None => (None, false),
        },
    };
    // The date of the document: the date it speaks as of, else the latest it states for its
    // figures.
    let date = prepared.as_of.unwrap_or_else(|| {
        sentences
            .iter()
            .map(|s| claims::stated_date(s))
            .max()
            .unwrap_or(0)
    });
    let mut found = document_claims(
        &sentences,
        &entities,
        &aliases,
        (subject.as_deref(), sure),
        &doc_type,
        date,
        prepared.title.as_deref().unwrap_or(label),
    );
    if let (Some(subject), Some(day)) = (subject.as_deref(), prepared.as_of) {
        let title = prepared.title.as_deref().unwrap_or(label);
        found.extend(dated_event(subject, title, day, &sentences, &found));
    }
    let ranked = ranked_entities(&found, &entities, &sentences, max_entities);
    let kept: BTreeSet<String> = ranked.iter().cloned().collect();
    found.retain(|c| kept.contains(&c.entity));
    let mut entities: Vec<String> = ranked;
    entities.sort();
    let aliases: Vec<(String, String)> = aliases
        .into_iter()
        .filter(|(_, canonical)| kept.contains(canonical))
        .collect();
    // Concepts are topics, not the names already kept as entities.
    let entity_words: BTreeSet<String> = entities.iter().flat_map(|e| text::words(e)).collect();
    let discussed = discussed(text, &doc_type);
    let concepts: Vec<String> = text::key_phrases(&discussed, CONCEPTS_PER_SOURCE * 3)
        .into_iter()
        .filter(|phrase| !phrase.split(' ').any(|w| entity_words.contains(w)))
        .take(CONCEPTS_PER_SOURCE)
        .collect();
    Analysis {
        doc_type,
        sentences,
        summary,
        entities,
        aliases,
        concepts,
        claims: found,
        date,
        as_of: prepared.as_of,
        subject: subject.filter(|s| kept.contains(s)),
    }
}

/// The document's entities — named in its text, in its label or title (a label such as
/// "Portugal (2024 edition)" names the subject even when the text says "the country"), or
/// declared — and the aliases among them (acronyms of another name), which are not entities
/// of their own.
fn document_entities(
    sentences: &[String],
    label: &str,
    prepared: &text::document::Prepared,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut entities = text::entities(sentences);
    // A label such as "Portugal (2024 edition)" names the document's subject even when the text
    // calls it "the country".
    // A title's first word is a name's, not a sentence's: read it as if mid-sentence.
    let titles: Vec<String> = std::iter::once(label)
        .chain(prepared.title.as_deref())
        .map(|t| format!("of {t}"))
        .collect();
    for name in text::entities(&titles) {
        if !entities.contains(&name)
            && name.split_whitespace().count() <= 4
            && name.chars().count() > 2
        {
            entities.push(name);
        }
    }
    // Subjects the caller or the front matter declares are entities, whatever the text says.
    for name in &prepared.subjects {
        if !entities.contains(name) {
            entities.push(name.clone());
        }
    }
    let aliases = text::aliases(&entities);
    // Acronyms of another name are aliases, not entities of their own.
    entities.retain(|e| !aliases.iter().any(|(alias, _)| alias == e));
    (entities, aliases)
}

/// The claims of a document's sentences: tables (consecutive rows that start with `|`) read
/// as tables, every other sentence as prose; entities named by an alias are their canonical
/// name's. `subject` and whether it is `sure`; the document's `title`.
fn document_claims(
    sentences: &[String],
    entities: &[String],
    aliases: &[(String, String)],
    (subject, sure): (Option<&str>, bool),
    doc_type: &str,
    date: u32,
    title: &str,
) -> Vec<Claim> {
    let mut found: Vec<Claim> = Vec::new();
    let names: Vec<String> = entities
        .iter()
        .cloned()
        .chain(aliases.iter().map(|(alias, _)| alias.clone()))
        .collect();
    let canonical = |name: &str| -> String {
        aliases
            .iter()
            .find(|(alias, _)| alias == name)
            .map_or_else(|| name.to_owned(), |(_, c)| c.clone())
    };
    let mut i = 0;
    while i < sentences.len() {
        // Tables: consecutive rows that start with `|`.
        if sentences[i].trim_start().starts_with('|') {
            let rows: Vec<&str> = sentences[i..]
                .iter()
                .take_while(|s| s.trim_start().starts_with('|'))
                .flat_map(|s| s.lines())
                .collect();
            found.extend(claims::from_table(&rows, i, date, subject, title));
            i += sentences[i..]
                .iter()
                .take_while(|s| s.trim_start().starts_with('|'))
                .count();
            continue;
        }
        // A transcript's "Name: …" lines are turns of speech, not fields of its subject.
        let fields = doc_type != "transcript";
        for mut claim in claims::extract_with(&sentences[i], i, &names, subject, sure, fields, date)
        {
            claim.entity = canonical(&claim.entity);
            claim.key = key(&claim.entity);
            found.push(claim);
        }
        i += 1;
    }
    found
}

/// A dateline under a title that names an event ("Django 4.2.3 release notes", then
/// "*July 3, 2023*") dates that event for the subject: the vocabulary's title events say
/// which ("release notes" → released). Only a date written in the text as a line of its own,
/// and only when no claim of the document already gives it.
fn dated_event(
    subject: &str,
    title: &str,
    day: u32,
    sentences: &[String],
    found: &[Claim],
) -> Option<Claim> {
    let title = title.to_lowercase();
    let event = crate::vocabulary::vocabulary()
        .title_events
        .iter()
        .find(|(phrase, _)| title.contains(phrase.as_str()))
        .map(|(_, event)| event.clone());
    let dateline = sentences
        .iter()
        .position(|s| s.split_whitespace().count() <= 6 && text::dates::find(s) == Some(day));
    let (Some(event), Some(at)) = (event, dateline) else {
        return None;
    };
    if found
        .iter()
        .any(|c| c.key == key(subject) && c.attribute == event)
    {
        return None;
    }
    Some(Claim::new(
        subject,
        event,
        (text::dates::show(day), None, String::new()),
        day,
        at,
    ))
}

/// Entities of claims first (they need a page), then the most mentioned, within the cap.
fn ranked_entities(
    found: &[Claim],
    entities: &[String],
    sentences: &[String],
    max_entities: usize,
) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    for claim in found {
        if !ranked.contains(&claim.entity) && entities.contains(&claim.entity) {
            ranked.push(claim.entity.clone());
        }
    }
    let mut by_mentions: Vec<(usize, &String)> = entities
        .iter()
        .map(|e| {
            (
                sentences
                    .iter()
                    .filter(|s| super::pages::mentions(s, e))
                    .count(),
                e,
            )
        })
        .collect();
    by_mentions.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    for (_, e) in by_mentions {
        if !ranked.contains(e) {
            ranked.push(e.clone());
        }
    }
    ranked.truncate(max_entities);
    ranked
}

/// What a document discusses: its text, without a transcript's speaker labels.
fn discussed<'a>(text: &'a str, doc_type: &str) -> std::borrow::Cow<'a, str> {
    if doc_type != "transcript" {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.lines()
            .map(|line| match line.split_once(':') {
                Some((who, said)) if who.split_whitespace().count() <= 3 => said,
                _ => line,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

impl Wiki {
    /// Ingests a source (see [`Wiki::ingest_with`]).
    pub async fn ingest(&self, tenant: &str, source: Source) -> WikiResult<Value> {
        self.ingest_with(tenant, source, &super::no_progress).await
    }

    /// Ingests a source: stores the raw text (content-hash id), writes the source page,
    /// creates or updates entity and concept pages, updates the index and the log — one commit
    /// — and the search index. The same source twice changes nothing.
    pub async fn ingest_with(
        &self,
        tenant: &str,
        source: Source,
        progress: Progress<'_>,
    ) -> WikiResult<Value> {
        // The whole write runs on the write runtime, below the priority of the threads that
        // answer queries (a bulk load in one tenant must not slow another's questions); its
        // progress comes back here over a channel.
        let (sender, mut updates) = tokio::sync::mpsc::unbounded_channel::<(f64, f64, String)>();
        let wiki = self.clone();
        let owned_tenant = tenant.to_owned();
        let write = crate::work::write(async move {
            let report = move |done: f64, total: f64, message: &str| {
                let _ = sender.send((done, total, message.to_owned()));
            };
            wiki.ingest_here(&owned_tenant, source, &report).await
        });
        tokio::pin!(write);
        loop {
            tokio::select! {
                Some((done, total, message)) = updates.recv() => progress(done, total, &message),
                result = &mut write => {
                    while let Ok((done, total, message)) = updates.try_recv() {
                        progress(done, total, &message);
                    }
                    return result.map_err(|error| WikiError::Internal(error.to_string()))?;
                }
            }
        }
    }

    async fn ingest_here(
        &self,
        tenant: &str,
        source: Source,
        progress: Progress<'_>,
    ) -> WikiResult<Value> {
        check_text(&source.text)?;
        progress(0.0, 4.0, "reading the source");
        let id = hash(&source.text);
        let raw_key = format!("{}/raw/{id}.txt", root(tenant));
        let marker_key = format!("{}/raw/{id}.json", root(tenant));
        // The model call (if any) happens before taking the tenant's lock, and only for a
        // source not stored yet: replays cost nothing.
        let known = self.storage.get(&marker_key).await?;
        let (analysis, llm, merged) = self.analysed(&source, known.is_none()).await?;
        progress(1.0, 4.0, "analysed: writing pages");
        let lease = self.storage.lock(tenant).await?;
        let index = self.fresh_index(tenant).await?;
        let today = self.today();
        let mut batch = Batch::default();
        let path = self
            .source_path(tenant, &batch, &marker_key, &source.label, &id)
            .await?;
        let new_source = self.read_page(tenant, &batch, &path).await?.is_none();
        if new_source {
            let stored = self.charge(tenant, &index, &analysis, &source).await?;
            batch.put(format!("{}/.usage", root(tenant)), stored.to_string());
            batch.put(raw_key, source.text.clone());
            batch.put(marker_key, json!({"page": path}).to_string());
        }
        let link = path.trim_end_matches(".md").to_owned();
        let mut page = match self.read_page(tenant, &batch, &path).await? {
            Some(page) => page,
            None => Page::new(path.clone(), &source.label, "source", &today),
        };
        if page.get("id").is_empty() {
            fill_source_page(&mut page, &id, &analysis, &source, &link, llm.as_ref());
        }
        let mut receipts: Vec<Receipt> = Vec::new();
        let mut changed: Vec<Page> = Vec::new();
        if self
            .write_page(tenant, &page, &mut receipts, &mut batch)
            .await?
        {
            changed.push(page.clone());
        }
        let aliases = page_aliases(&page);
        let entities = page.list("entities");
        let concepts = page.list("concepts");
        let claims = super::pages::page_claims(&page);
        let mentioned = Mentioned {
            link: &link,
            aliases: &aliases,
            claims: &claims,
            sentences: &analysis.sentences,
            today: &today,
        };
        let lists = [("entities", &entities[..]), ("concepts", &concepts[..])];
        self.write_entries(
            tenant,
            &mentioned,
            lists,
            &mut batch,
            &mut receipts,
            &mut changed,
        )
        .await?;
        progress(2.0, 4.0, "pages written: updating the index");
        let all_unchanged = changed.is_empty();
        if !all_unchanged {
            self.commit_ingest(tenant, &lease, &index, &source.label, batch, changed)
                .await?;
        }
        lease.release().await;
        progress(4.0, 4.0, "done");
        Ok(receipt(&Ingested {
            path: &path,
            id: &id,
            link: &link,
            page: &page,
            analysis: &analysis,
            receipts,
            unchanged: all_unchanged,
            llm: llm.as_ref(),
            merged: merged.as_ref(),
        }))
    }

    /// Every entity and concept page the source names, created or given the source
    /// ([`update_entry`]), written into `batch`; the pages that changed added to `changed`.
    async fn write_entries(
        &self,
        tenant: &str,
        mentioned: &Mentioned<'_>,
        lists: [(&str, &[String]); 2],
        batch: &mut Batch,
        receipts: &mut Vec<Receipt>,
        changed: &mut Vec<Page>,
    ) -> WikiResult<()> {
        for (kind, names) in lists {
            for name in names {
                let target = format!("{kind}/{}.md", text::slug(name));
                let mut entry = match self.read_page(tenant, batch, &target).await? {
                    Some(entry) => entry,
                    None => new_entry(target, name, kind, mentioned.today),
                };
                update_entry(&mut entry, kind, name, mentioned);
                if self.write_page(tenant, &entry, receipts, batch).await? {
                    changed.push(entry);
                }
            }
        }
        Ok(())
    }

    /// Commits an ingest that changed pages: the index updated for them, a log line, the
    /// batch and the search index.
    async fn commit_ingest(
        &self,
        tenant: &str,
        lease: &crate::storage::TenantLease,
        index: &std::sync::Arc<crate::index::TenantIndex>,
        label: &str,
        mut batch: Batch,
        changed: Vec<Page>,
    ) -> WikiResult<()> {
        let index_key = format!("{}/wiki/index.md", root(tenant));
        let index_md = match self.read_through(&batch, &index_key).await? {
            Some(existing) => Wiki::update_index(&existing, &changed),
            None => Wiki::render_index(index.catalogue()?, &changed),
        };
        batch.put(index_key, index_md);
        self.append_log(tenant, "ingest", label, &mut batch).await?;
        self.commit(tenant, lease, index, batch, changed, Vec::new())
            .await
    }

    /// The source page's path: the one this text was stored under, else a free slug.
    async fn source_path(
        &self,
        tenant: &str,
        batch: &Batch,
        marker_key: &str,
        label: &str,
        id: &str,
    ) -> WikiResult<String> {
        let known_path = self
            .storage
            .get(marker_key)
            .await?
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["page"].as_str().map(str::to_owned));
        Ok(match known_path {
            Some(path) => path,
            None => {
                let base = text::slug(label);
                let mut path = format!("sources/{base}.md");
                if self.read_page(tenant, batch, &path).await?.is_some() {
                    path = format!("sources/{base}-{}.md", &id[..6]);
                }
                path
            }
        })
    }

    /// The source analysed (on the CPU pool), then read by the model when one is configured
    /// and the source is `unknown` (replays cost nothing), its extraction merged.
    async fn analysed(
        &self,
        source: &Source,
        unknown: bool,
    ) -> WikiResult<(Analysis, Option<crate::llm::LlmOutcome>, Option<Merged>)> {
        let mut analysis = {
            let (text, label, doc_type, as_of, subjects) = (
                source.text.clone(),
                source.label.clone(),
                source.doc_type.clone(),
                source.as_of,
                source.subjects.clone(),
            );
            let max_entities = self.quotas.max_entities_per_ingest;
            crate::work::cpu(move || {
                analyse(&text, &label, &doc_type, max_entities, as_of, &subjects)
            })
            .await?
        };
        let llm = match &self.llm {
            Some(llm) if unknown => Some(
                llm.read(
                    &analysis.sentences,
                    source.model.as_deref(),
                    source.cost_cap_usd,
                )
                .await,
            ),
            _ => None,
        };
        let merged = match &llm {
            Some(crate::llm::LlmOutcome::Summary {
                entities, claims, ..
            }) => Some(merge_extraction(
                &mut analysis,
                entities,
                claims,
                self.quotas.max_entities_per_ingest,
            )),
            _ => None,
        };
        Ok((analysis, llm, merged))
    }

    /// Quotas of a new source: pages of the tenant, bytes of its sources. The bytes stored
    /// once it is added.
    async fn charge(
        &self,
        tenant: &str,
        index: &crate::index::TenantIndex,
        analysis: &Analysis,
        source: &Source,
    ) -> WikiResult<usize> {
        let pages = index.page_count()?;
        let adding = 1 + analysis.entities.len() + analysis.concepts.len();
        if pages + adding > self.quotas.max_pages {
            return Err(WikiError::Quota(format!(
                "the tenant's wiki holds {pages} pages; this source would pass the limit of {}",
                self.quotas.max_pages
            )));
        }
        let usage_key = format!("{}/.usage", root(tenant));
        let stored: usize = self
            .storage
            .get(&usage_key)
            .await?
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        if stored + source.text.len() > self.quotas.max_bytes {
            return Err(WikiError::Quota(format!(
                "the tenant's wiki holds {stored} bytes of sources; this one would pass the limit of {}",
                self.quotas.max_bytes
            )));
        }
        Ok(stored + source.text.len())
    }
}

/// What the model's extraction added to an analysis, and what was refused.
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct Merged {
    /// Entities added (the deterministic reading missed them).
    pub entities_added: Vec<String>,
    /// Claims found in the source and filed.
    pub claims_added: usize,
    /// Entities and claims refused, each with why.
    pub refused: Vec<String>,
}

/// Adds the entities and claims a model extracted to `analysis`, each checked against the
/// text first (see [`checked_entity`] and [`checked_claim`]). A claim the deterministic reading
/// already made of that sentence stays as it was.
pub(crate) fn merge_extraction(
    analysis: &mut Analysis,
    entities: &[String],
    extracted: &[crate::llm::Extracted],
    max_entities: usize,
) -> Merged {
    let mut merged = Merged::default();
    for name in entities {
        let name = name.trim();
        let known = analysis
            .entities
            .iter()
            .chain(analysis.aliases.iter().map(|(alias, _)| alias))
            .any(|e| key(e) == key(name));
        if known {
            continue;
        }
        match checked_entity(analysis, name, max_entities) {
            Ok(()) => {
                analysis.entities.push(name.to_owned());
                merged.entities_added.push(name.to_owned());
            }
            Err(why) => merged.refused.push(format!("entity {name:?}: {why}")),
        }
    }
    for claim in extracted {
        match checked_claim(analysis, claim) {
            Ok(Some(found)) => {
                analysis.claims.push(found);
                merged.claims_added += 1;
            }
            Ok(None) => {}
            Err(why) => merged.refused.push(why),
        }
    }
    merged
}

/// Whether a model's entity may join: written in the source, as a name (capitalised, 1 to 6
/// words, not a month or a stop word), within the per-ingest cap.
fn checked_entity(analysis: &Analysis, name: &str, max_entities: usize) -> Result<(), String> {
    let words = name.split_whitespace().count();
    let is_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
        && (1..=6).contains(&words)
        && name.chars().count() <= 80
        && !text::is_calendar(name)
        && !text::is_stopword(&name.to_lowercase());
    if !is_name || !analysis.sentences.iter().any(|s| s.contains(name)) {
        return Err("not written in the source as a name".into());
    }
    if analysis.entities.len() >= max_entities {
        return Err(format!("over {max_entities} entities per ingest"));
    }
    Ok(())
}

/// A model's claim as the store keeps it, when its sentence exists, its entity is one of the
/// source's (or an alias of one), its attribute reads as one and that sentence writes its
/// value; `None` when the deterministic reading already made it; else why not.
fn checked_claim(
    analysis: &Analysis,
    claim: &crate::llm::Extracted,
) -> Result<Option<Claim>, String> {
    let Some(sentence) = analysis.sentences.get(claim.sentence) else {
        return Err(format!(
            "claim of sentence {}: no such sentence",
            claim.sentence
        ));
    };
    let entity = analysis
        .aliases
        .iter()
        .find(|(alias, _)| key(alias) == key(&claim.entity))
        .map(|(_, of)| of.clone())
        .or_else(|| {
            analysis
                .entities
                .iter()
                .find(|e| key(e) == key(&claim.entity))
                .cloned()
        })
        .ok_or_else(|| {
            format!(
                "claim about {:?}: not an entity of the source",
                claim.entity
            )
        })?;
    let attribute = claims::attribute(&claim.attribute)
        .ok_or_else(|| format!("claim {:?}: not an attribute", claim.attribute))?;
    let value = claim.value.trim();
    if value.is_empty() || !sentence.to_lowercase().contains(&value.to_lowercase()) {
        return Err(format!(
            "claim {attribute} of {entity} = {value:?}: sentence {} does not write it",
            claim.sentence
        ));
    }
    let claim_key = key(&entity);
    if analysis
        .claims
        .iter()
        .any(|c| c.key == claim_key && c.attribute == attribute && c.sentence == claim.sentence)
    {
        return Ok(None);
    }
    let (number, unit) = match claims::values::number(value) {
        Some((_, number, unit, rest)) if rest.trim().is_empty() => (Some(number), unit),
        _ => (None, String::new()),
    };
    let unit = if unit.is_empty() {
        claim.unit.trim().to_owned()
    } else {
        unit
    };
    let mut qualifiers: Vec<String> = claim
        .qualifiers
        .iter()
        .map(|q| q.trim().to_lowercase())
        .filter(|q| !q.is_empty() && q.chars().count() <= 40)
        .take(3)
        .collect();
    qualifiers.sort();
    qualifiers.dedup();
    let mut found = Claim::new(
        &entity,
        attribute,
        (value.to_owned(), number, unit),
        analysis.date,
        claim.sentence,
    );
    found.qualifiers = qualifiers;
    Ok(Some(found))
}

/// The first ingest's source page: its id, kind, raw text, summary, entities, aliases,
/// concepts, claims, dates, subject and origin, and its body (with the model's summary when
/// one was read).
fn fill_source_page(
    page: &mut Page,
    id: &str,
    analysis: &Analysis,
    source: &Source,
    link: &str,
    llm: Option<&crate::llm::LlmOutcome>,
) {
    page.meta.insert("id".into(), json!(id));
    page.meta
        .insert("doc_type".into(), json!(analysis.doc_type));
    page.meta
        .insert("raw".into(), json!(format!("raw/{id}.txt")));
    page.meta.insert(
        "summary".into(),
        json!(
            analysis
                .summary
                .first()
                .map(|(_, s)| s.clone())
                .unwrap_or_default()
        ),
    );
    page.meta
        .insert("entities".into(), json!(analysis.entities));
    page.meta.insert(
        "aliases".into(),
        json!(
            analysis
                .aliases
                .iter()
                .map(|(a, c)| [a, c])
                .collect::<Vec<_>>()
        ),
    );
    page.meta
        .insert("concepts".into(), json!(analysis.concepts));
    page.meta.insert("claims".into(), json!(analysis.claims));
    page.meta.insert("date".into(), json!(analysis.date));
    if let Some(as_of) = analysis.as_of {
        page.meta
            .insert("as_of".into(), json!(text::dates::show(as_of)));
    }
    match &analysis.subject {
        Some(subject) => page.meta.insert("subject".into(), json!(subject)),
        None => page.meta.remove("subject"),
    };
    if let Some(origin) = &source.origin {
        page.meta.insert("origin".into(), json!(origin));
    }
    page.body = source_body(
        &source.label,
        link,
        &analysis.summary,
        &analysis.entities,
        &analysis.concepts,
        &analysis.claims,
        &analysis.sentences,
    );
    if let Some(crate::llm::LlmOutcome::Summary { text, model, .. }) = llm {
        page.meta.insert("llm_summary".into(), json!(text));
        page.body = page.body.replacen(
            "\n## Text\n",
            &format!("\n## Summary by {model}\n{text}\n\n## Text\n"),
            1,
        );
    }
}

/// A new entity or concept page for `name`.
fn new_entry(target: String, name: &str, kind: &str, today: &str) -> Page {
    let mut p = Page::new(
        target.clone(),
        name,
        if kind == "entities" {
            "entity"
        } else {
            "concept"
        },
        today,
    );
    p.meta.insert("aliases".into(), json!([]));
    p.meta.insert("sources".into(), json!([]));
    p.body = format!("# {}\n\n## Mentions\n", crate::page::label(name));
    p
}

/// What one source says of the names it mentions.
struct Mentioned<'a> {
    link: &'a str,
    aliases: &'a [(String, String)],
    claims: &'a [Claim],
    sentences: &'a [String],
    today: &'a str,
}

/// Adds a source to an entity or concept page: the source, an entity's aliases and claims,
/// the sentences that mention it; its summary and facts redone when anything changed.
fn update_entry(entry: &mut Page, kind: &str, name: &String, source: &Mentioned<'_>) {
    let Mentioned {
        link,
        aliases,
        claims,
        sentences,
        today,
    } = *source;
    let mut sources = entry.list("sources");
    let mut touched = false;
    if !sources.iter().any(|s| s == link) {
        sources.push(link.to_owned());
        sources.sort();
        entry.meta.insert("sources".into(), json!(sources));
        touched = true;
    }
    if kind == "entities" {
        // Aliases of the name, and the claims about it.
        let mut known: Vec<String> = entry.list("aliases");
        for (alias, canonical) in aliases {
            if canonical == name && !known.contains(alias) {
                known.push(alias.clone());
                touched = true;
            }
        }
        known.sort();
        entry.meta.insert("aliases".into(), json!(known));
        let mut kept: Vec<Value> = entry
            .meta
            .get("claims")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for claim in claims.iter().filter(|c| c.key == key(name)) {
            let value = entity_claim(claim, link);
            if !kept.contains(&value) {
                kept.push(value);
                touched = true;
            }
        }
        if !kept.is_empty() {
            entry.meta.insert("claims".into(), json!(kept));
        }
    }
    let names_of_entry: Vec<String> = std::iter::once(name.clone())
        .chain(entry.list("aliases"))
        .collect();
    for (i, sentence) in sentences
        .iter()
        .enumerate()
        .filter(|(_, s)| names_of_entry.iter().any(|n| super::pages::mentions(s, n)))
        .take(MENTIONS_PER_SOURCE)
    {
        let marker = format!("[[{link}#^s{i}]]");
        if !entry.body.contains(&marker) {
            entry
                .body
                .push_str(&format!("- [{today}] {marker}: {sentence}\n"));
            touched = true;
        }
    }
    if touched {
        entry.meta.insert("updated".into(), json!(today));
        if kind == "entities" {
            write_facts(entry);
        }
        let facts = super::pages::page_claims(entry).len();
        let summary = if facts > 0 {
            format!(
                "Mentioned in {} source(s); {facts} fact(s).",
                entry.list("sources").len()
            )
        } else {
            format!("Mentioned in {} source(s).", entry.list("sources").len())
        };
        entry.meta.insert("summary".into(), json!(summary));
    }
}

/// The ingest receipt's `llm`: the model's summary, tokens, cost and extraction, or why the
/// deterministic reading was used.
fn llm_json(llm: Option<&crate::llm::LlmOutcome>, merged: Option<&Merged>) -> Value {
    match llm {
        Some(crate::llm::LlmOutcome::Summary {
            text,
            model,
            prompt_tokens,
            completion_tokens,
            cost_usd,
            ..
        }) => json!({
            "summary": text, "model": model, "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens, "cost_usd": cost_usd,
            "extracted": merged,
        }),
        Some(crate::llm::LlmOutcome::Fallback(reason)) => json!({"fallback": reason}),
        None => Value::Null,
    }
}

/// A source's text: not blank, at most [`super::MAX_TEXT`] characters.
fn check_text(text: &str) -> WikiResult<()> {
    if text.trim().is_empty() {
        return Err(WikiError::Invalid("the source has no text".into()));
    }
    if text.chars().count() > super::MAX_TEXT {
        return Err(WikiError::Invalid(format!(
            "the source is over {} characters",
            super::MAX_TEXT
        )));
    }
    Ok(())
}

/// What one ingest did, for its receipt.
struct Ingested<'a> {
    path: &'a str,
    id: &'a str,
    link: &'a str,
    page: &'a Page,
    analysis: &'a Analysis,
    receipts: Vec<Receipt>,
    unchanged: bool,
    llm: Option<&'a crate::llm::LlmOutcome>,
    merged: Option<&'a Merged>,
}

/// The ingest's answer: the source page, its summary with citations, what it named, the
/// pages written, and the engine that read it.
fn receipt(ingested: &Ingested<'_>) -> Value {
    let Ingested {
        path,
        id,
        link,
        page,
        analysis,
        unchanged: all_unchanged,
        llm,
        merged,
        ..
    } = *ingested;
    let receipts = &ingested.receipts;
    let aliases = page_aliases(page);
    let entities = page.list("entities");
    let concepts = page.list("concepts");
    let claims = super::pages::page_claims(page);
    let summary: Vec<Value> = analysis
        .summary
        .iter()
        .map(|(i, s)| json!({"sentence": s, "cite": format!("[[{link}#^s{i}]]")}))
        .collect();
    let keys_mentioned = analysis
        .sentences
        .iter()
        .flat_map(|s| keys_in(s, &entities, &aliases))
        .collect::<BTreeSet<_>>()
        .len();
    json!({
        "source": format!("wiki/{path}"),
        "raw": format!("raw/{id}.txt"),
        "doc_type": page.get("doc_type"),
        "summary": summary,
        "entities": entities,
        "aliases": aliases.iter().map(|(a, c)| json!({"alias": a, "of": c})).collect::<Vec<_>>(),
        "concepts": concepts,
        "claims": claims.len(),
        "entities_mentioned": keys_mentioned,
        "date": super::pages::show_date(super::pages::page_date(page)),
        "as_of": page.meta.get("as_of").cloned().unwrap_or(Value::Null),
        "pages": receipts,
        "idempotent_replay": all_unchanged,
        "engine": if matches!(llm, Some(crate::llm::LlmOutcome::Summary { .. })) { "llm" } else { "deterministic" },
        "llm": llm_json(llm, merged),
        "cost_usd": match llm {
            Some(crate::llm::LlmOutcome::Summary { cost_usd, .. }) => *cost_usd,
            _ => 0.0,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_gives_its_entities_and_the_claims_of_its_sentences() {
        let memo = "The board of Acme Corp met in Berlin on 3 October. Jane Smith presented the Q3 results. \
Acme Corp was founded in 1999 by Jane Smith. Hiring will focus on data engineering in the Berlin office.";
        let analysis = analyse(memo, "Q3 board memo", "auto", 40, None, &[]);
        assert_eq!(
            analysis.entities,
            ["Acme Corp", "Berlin", "Jane Smith"],
            "{analysis:?}"
        );
        let founded: Vec<&Claim> = analysis
            .claims
            .iter()
            .filter(|c| c.attribute == "founded")
            .collect();
        assert_eq!(founded.len(), 1, "{analysis:?}");
        assert_eq!(founded[0].entity, "Acme Corp");
        assert_eq!(founded[0].number, Some(1999.0));
        // A founding year is the value of a claim, not the date of the document.
        assert_eq!(analysis.date, 0);
    }

    /// Release notes dated by a dateline under their title say when their subject was
    /// released (the vocabulary's title events); a memo's dateline says nothing of the kind,
    /// and neither does a date the text mentions in passing.
    #[test]
    fn a_dateline_under_an_event_title_dates_the_event() {
        let notes = "Django 4.2.3 release notes\n==========================\n\n*July 3, 2023*\n\nDjango 4.2.3 fixes a security issue and several bugs in 4.2.2.\n";
        let analysis = analyse(notes, "Django 4.2.3 release notes", "auto", 40, None, &[]);
        let released: Vec<&Claim> = analysis
            .claims
            .iter()
            .filter(|c| c.attribute == "released")
            .collect();
        assert_eq!(released.len(), 1, "{analysis:?}");
        assert_eq!(released[0].entity, "Django 4.2.3");
        assert_eq!(released[0].value, "2023-07-03");
        assert_eq!(released[0].date, 20_230_703);
        assert!(analysis.sentences[released[0].sentence].contains("July 3, 2023"));
        let memo = "Acme Corp board memo\n\n*July 3, 2023*\n\nAcme Corp met in Berlin.\n";
        let analysis = analyse(memo, "Acme Corp board memo", "auto", 40, None, &[]);
        assert!(
            analysis.claims.iter().all(|c| c.value != "2023-07-03"),
            "{analysis:?}"
        );
    }

    /// `index.md` updated in place (what an ingest writes) is the file a render from the whole
    /// catalogue gives: entries added in path order, replaced ones rewritten, counts right, and
    /// titles that look like link syntax kept from breaking the lines.
    #[test]
    fn index_md_updated_in_place_equals_a_render_from_the_catalogue() {
        let page = |path: &str, title: &str, summary: &str| {
            let mut page = Page::new(path.to_owned(), title, "entity", "2026-11-27");
            page.meta.insert("summary".into(), json!(summary));
            page
        };
        let entry = |p: &Page| crate::index::CatalogEntry {
            path: p.path.clone(),
            title: p.title().to_owned(),
            summary: p.get("summary").to_owned(),
        };
        let before = [
            page("entities/acme.md", "Acme", "Mentioned in 1 source(s)."),
            page("sources/memo.md", "Memo", "The board met."),
            page("entities/zeta.md", "Zeta | ]] odd", ""),
        ];
        let changed = [
            page("entities/acme.md", "Acme", "Mentioned in 2 source(s)."),
            page("entities/berlin.md", "Berlin", ""),
            page(
                "concepts/data-engineering.md",
                "data engineering",
                "Mentioned in 3 source(s).",
            ),
        ];
        let existing = Wiki::render_index(before.iter().map(entry).collect(), &[]);
        let updated = Wiki::update_index(&existing, &changed);
        let mut all: Vec<crate::index::CatalogEntry> = before.iter().map(entry).collect();
        all.retain(|e| e.path != "entities/acme.md");
        all.extend(changed.iter().map(entry));
        assert_eq!(updated, Wiki::render_index(all, &[]), "{updated}");
        assert!(updated.contains("## Entities (3)"), "{updated}");
        assert!(updated.contains("Mentioned in 2 source(s)."), "{updated}");
        assert!(!updated.contains("Mentioned in 1 source(s)."), "{updated}");
        // Applying the same change again changes nothing.
        assert_eq!(Wiki::update_index(&updated, &changed), updated);
    }
}
