//! Reading a tenant's index: passages for a question, claims by entity and attribute, pages
//! by words, and the catalogue.

use super::*;

impl TenantIndex {
    /// The stemmed tokens of `text`, as the index's text fields hold them.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let Some(mut analyzer) = self.index.tokenizers().get("en_stem") else {
            return Vec::new();
        };
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            let token = stream.token().text.clone();
            if !out.contains(&token) {
                out.push(token);
            }
        }
        out
    }

    pub(super) fn kind(&self, kind: &str) -> Box<dyn Query> {
        Box::new(TermQuery::new(
            Term::from_field_text(self.fields.kind, kind),
            IndexRecordOption::Basic,
        ))
    }

    pub(super) fn any_key(&self, keys: &[String]) -> Box<dyn Query> {
        Box::new(BooleanQuery::new(
            keys.iter()
                .map(|k| {
                    (
                        Occur::Should,
                        Box::new(TermQuery::new(
                            Term::from_field_text(self.fields.key, k),
                            IndexRecordOption::Basic,
                        )) as Box<dyn Query>,
                    )
                })
                .collect(),
        ))
    }

    pub(super) fn words_query(&self, tokens: &[String], with_names: bool) -> Box<dyn Query> {
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for token in tokens {
            let term = |field: Field| -> Box<dyn Query> {
                Box::new(TermQuery::new(
                    Term::from_field_text(field, token),
                    IndexRecordOption::WithFreqs,
                ))
            };
            clauses.push((Occur::Should, term(f.text)));
            clauses.push((Occur::Should, Box::new(BoostQuery::new(term(f.title), 1.5))));
            if with_names {
                clauses.push((Occur::Should, Box::new(BoostQuery::new(term(f.names), 2.0))));
            }
        }
        Box::new(BooleanQuery::new(clauses))
    }

    /// The best passages for `tokens` (stemmed, see [`TenantIndex::tokens`]), only among those
    /// mentioning one of `keys` when any are given.
    pub fn passages(
        &self,
        tokens: &[String],
        keys: &[String],
        limit: usize,
    ) -> IndexResult<Vec<Passage>> {
        self.passages_where(tokens, keys, false, limit)
    }

    /// The best passages for `tokens` among those concerning every one of `keys`.
    pub fn passages_of_all(
        &self,
        tokens: &[String],
        keys: &[String],
        limit: usize,
    ) -> IndexResult<Vec<Passage>> {
        self.passages_where(tokens, keys, true, limit)
    }

    fn passages_where(
        &self,
        tokens: &[String],
        keys: &[String],
        all: bool,
        limit: usize,
    ) -> IndexResult<Vec<Passage>> {
        if tokens.is_empty() && keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut clauses = vec![(Occur::Must, self.kind("passage"))];
        if !tokens.is_empty() {
            // With keys, a passage of the subject that shares no word still counts (its
            // document's title may carry the question's words); without, words must match.
            let occur = if keys.is_empty() {
                Occur::Must
            } else {
                Occur::Should
            };
            clauses.push((occur, self.words_query(tokens, false)));
        }
        if all {
            for key in keys {
                clauses.push((Occur::Must, self.any_key(std::slice::from_ref(key))));
            }
        } else if !keys.is_empty() {
            clauses.push((Occur::Must, self.any_key(keys)));
        }
        let searcher = self.reader.searcher();
        let top = searcher.search(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(limit).order_by_score(),
        )?;
        let f = self.fields;
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            out.push(Passage {
                path: str_of(&doc, f.path),
                title: str_of(&doc, f.title),
                cite: str_of(&doc, f.cite),
                text: str_of(&doc, f.text),
                score,
                keys: strs_of(&doc, f.key),
                date: doc.get_first(f.date).and_then(|v| v.as_u64()).unwrap_or(0),
            });
        }
        Ok(out)
    }

    pub(super) fn claims_where(
        &self,
        clauses: Vec<(Occur, Box<dyn Query>)>,
        limit: usize,
    ) -> IndexResult<Vec<FoundClaim>> {
        let searcher = self.reader.searcher();
        let top = searcher.search(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(limit).order_by_score(),
        )?;
        let f = self.fields;
        let mut out = Vec::with_capacity(top.len());
        for (_, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let extra: serde_json::Value =
                serde_json::from_str(&str_of(&doc, f.extra)).unwrap_or_default();
            out.push(FoundClaim {
                path: str_of(&doc, f.path),
                cite: str_of(&doc, f.cite),
                text: str_of(&doc, f.text),
                claim: crate::claims::Claim {
                    entity: str_of(&doc, f.entity),
                    key: str_of(&doc, f.key),
                    attribute: str_of(&doc, f.attribute),
                    value: str_of(&doc, f.value),
                    number: doc.get_first(f.number).and_then(|v| v.as_f64()),
                    unit: str_of(&doc, f.unit),
                    date: doc
                        .get_first(f.date)
                        .and_then(|v| v.as_u64())
                        .and_then(|d| u32::try_from(d).ok())
                        .unwrap_or(0),
                    sentence: 0,
                    qualifiers: serde_json::from_value(extra["qualifiers"].clone())
                        .unwrap_or_default(),
                    replaces: extra["replaces"].as_str().map(str::to_owned),
                },
            });
        }
        Ok(out)
    }

    /// The claims of one attribute of one entity, newest first.
    pub fn claims(&self, key: &str, attribute: &str) -> IndexResult<Vec<FoundClaim>> {
        let term = |field: Field, text: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(
                Term::from_field_text(field, text),
                IndexRecordOption::Basic,
            ))
        };
        let mut found = self.claims_where(
            vec![
                (Occur::Must, self.kind("claim")),
                (Occur::Must, term(self.fields.key, key)),
                (Occur::Must, term(self.fields.attribute, attribute)),
            ],
            200,
        )?;
        found.sort_by(|a, b| b.claim.date.cmp(&a.claim.date).then(a.cite.cmp(&b.cite)));
        Ok(found)
    }

    /// Every claim about an entity, newest first.
    pub fn claims_of(&self, key: &str) -> IndexResult<Vec<FoundClaim>> {
        let term: Box<dyn Query> = Box::new(TermQuery::new(
            Term::from_field_text(self.fields.key, key),
            IndexRecordOption::Basic,
        ));
        let mut found = self.claims_where(
            vec![(Occur::Must, self.kind("claim")), (Occur::Must, term)],
            2000,
        )?;
        found.sort_by(|a, b| b.claim.date.cmp(&a.claim.date).then(a.cite.cmp(&b.cite)));
        Ok(found)
    }

    /// The attributes the index holds claims of, for an entity.
    pub fn attributes_of(&self, key: &str) -> IndexResult<Vec<String>> {
        let term: Box<dyn Query> = Box::new(TermQuery::new(
            Term::from_field_text(self.fields.key, key),
            IndexRecordOption::Basic,
        ));
        let mut attributes: Vec<String> = self
            .claims_where(
                vec![(Occur::Must, self.kind("claim")), (Occur::Must, term)],
                1000,
            )?
            .into_iter()
            .map(|c| c.claim.attribute)
            .collect();
        attributes.sort();
        attributes.dedup();
        Ok(attributes)
    }

    /// Every claim (for lint).
    pub fn all_claims(&self) -> IndexResult<Vec<FoundClaim>> {
        let count = usize::try_from(self.reader.searcher().num_docs()).unwrap_or(usize::MAX);
        self.claims_where(vec![(Occur::Must, self.kind("claim"))], count.max(1))
    }

    /// Whether a page stands for entity `key` (an entity page, or a concept page by its
    /// title): the page's path.
    pub fn page_for_key(&self, key: &str) -> IndexResult<Option<String>> {
        let query = BooleanQuery::new(vec![
            (Occur::Must, self.kind("page")),
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.key, key),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
        ]);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(4).order_by_score())?;
        let mut paths = Vec::new();
        for (_, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            paths.push(str_of(&doc, self.fields.path));
        }
        // An entity page before a concept or source page of the same name.
        paths.sort_by_key(|p| (!p.starts_with("entities/"), p.clone()));
        Ok(paths.into_iter().next())
    }

    /// Entity pages one of whose names holds every word of `words` (lower-case, whole words):
    /// "Northwind" finds "Northwind Logistics". Paths and keys, best match first.
    pub fn entities_with_words(&self, words: &[String]) -> IndexResult<Vec<(String, Vec<String>)>> {
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let tokens = self.tokens(&words.join(" "));
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let query = BooleanQuery::new(vec![
            (Occur::Must, self.kind("page")),
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.folder, "entities"),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (Occur::Must, self.words_query(&tokens, true)),
        ]);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(16).order_by_score())?;
        let mut out = Vec::new();
        for (_, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let keys = strs_of(&doc, self.fields.key);
            let holds = keys.iter().any(|key| {
                let key_words: Vec<&str> = key.split(' ').collect();
                words.iter().all(|w| key_words.contains(&w.as_str()))
            });
            if holds {
                out.push((str_of(&doc, self.fields.path), keys));
            }
        }
        Ok(out)
    }

    /// The pages whose titles or names best match `tokens`.
    pub fn pages(&self, tokens: &[String], limit: usize) -> IndexResult<Vec<(String, f32)>> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let query = BooleanQuery::new(vec![
            (Occur::Must, self.kind("page")),
            (Occur::Must, self.words_query(tokens, true)),
        ]);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            out.push((str_of(&doc, self.fields.path), score));
        }
        Ok(out)
    }

    /// Every page: path, title and summary, in path order (what `index.md` lists).
    pub fn catalogue(&self) -> IndexResult<Vec<CatalogEntry>> {
        let searcher = self.reader.searcher();
        let count = usize::try_from(searcher.num_docs())
            .unwrap_or(usize::MAX)
            .max(1);
        let top = searcher.search(
            self.kind("page").as_ref(),
            &TopDocs::with_limit(count).order_by_score(),
        )?;
        let f = self.fields;
        let mut out = Vec::with_capacity(top.len());
        for (_, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            out.push(CatalogEntry {
                path: str_of(&doc, f.path),
                title: str_of(&doc, f.title),
                summary: str_of(&doc, f.summary),
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out.dedup_by(|a, b| a.path == b.path);
        Ok(out)
    }

    /// Pages in the index.
    pub fn page_count(&self) -> IndexResult<usize> {
        let searcher = self.reader.searcher();
        Ok(searcher.search(self.kind("page").as_ref(), &tantivy::collector::Count)?)
    }
}
