//! The tenant's synonym table, read and edited (see [`crate::synonyms`]).

use serde_json::{Map, Value, json};

use super::{Wiki, WikiError, WikiResult, root};
use crate::storage::Batch;
use crate::synonyms::Synonyms;

fn key(tenant: &str) -> String {
    format!("{}/synonyms.json", root(tenant))
}

impl Wiki {
    /// The tenant's synonym table (empty when it has none).
    pub async fn synonyms(&self, tenant: &str) -> WikiResult<Synonyms> {
        Ok(self
            .storage
            .get(&key(tenant))
            .await?
            .map(|text| Synonyms::parse(&text))
            .unwrap_or_default())
    }

    /// Shows the tenant's synonym table, after applying `changes` (phrase → meaning, `""`
    /// removes) when there are any: all or nothing, one revision and one log line.
    pub async fn edit_synonyms(
        &self,
        tenant: &str,
        changes: Option<&Map<String, Value>>,
    ) -> WikiResult<Value> {
        let Some(changes) = changes else {
            let table = self.synonyms(tenant).await?;
            return Ok(json!({"synonyms": table.to_json(), "entries": table.len(), "changed": 0}));
        };
        let index = self.fresh_index(tenant).await?;
        let lease = self.storage.lock(tenant).await?;
        let mut table = self.synonyms(tenant).await?;
        let changed = table.apply(changes).map_err(WikiError::Invalid)?;
        if changed > 0 {
            let mut batch = Batch::default();
            batch.put(key(tenant), table.to_json().to_string());
            let title = format!("{changed} of {} entries changed", table.len());
            self.append_log(tenant, "synonyms", &title, &mut batch)
                .await?;
            self.commit(tenant, &lease, &index, batch, Vec::new(), Vec::new())
                .await?;
        }
        lease.release().await;
        Ok(json!({"synonyms": table.to_json(), "entries": table.len(), "changed": changed}))
    }
}
