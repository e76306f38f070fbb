//! Who a credential is: API keys and access tokens, from L1, Redis or the control plane,
//! and how long a known identity is trusted while the control plane cannot be reached.

use super::*;

/// How many keys [`Caches::forget_keys`] reads from Redis in one round trip.
const FORGET_BATCH: usize = 256;

impl Caches {
    /// Refused by the control plane a moment ago: while the watch is caught up, until the next
    /// change; while it is not, until the entry expires (a refused key stays refused through an
    /// outage).
    fn refused_recently(&self, id: &KeyHash) -> bool {
        self.refused.get(id).is_some_and(|(head, at)| {
            at.elapsed() < REFUSED_FOR && (!self.versions.synced() || head == self.versions.head())
        })
    }

    /// Whether a cached identity may be served without asking the control plane: while the
    /// watch is caught up, resolved at or after the tenant's latest revision; while it is not,
    /// trusted as the last known good ([`Caches::trusted_while_unreachable`]).
    pub(super) fn current(&self, identity: &Identity, now: u64) -> bool {
        let (required, changed) =
            self.versions
                .identity_check(&identity.tenant, &identity.key_id, identity.revision);
        match required {
            Some(required) => identity.revision >= required && !identity.expired(now) && !changed,
            None => self.trusted_while_unreachable(identity, now),
        }
    }

    /// Whether a stale identity may still be served as the last known good while the control
    /// plane cannot be asked: not expired, no known change of its key or tenant deletion since
    /// it was resolved, and confirmed by the control plane within `identity_max_stale`.
    ///
    /// An edge whose watch has never caught up since it started does not know which keys
    /// changed while it was away: it trusts only identities the control plane confirmed to
    /// this process ([`Caches::unconfirmable`] otherwise).
    pub(super) fn trusted_while_unreachable(&self, identity: &Identity, now: u64) -> bool {
        let max_stale_ms =
            u64::try_from(self.settings.identity_max_stale.as_millis()).unwrap_or(u64::MAX);
        !self.unconfirmable(identity)
            && !identity.expired(now)
            && !self.versions.key_changed_after(
                &identity.tenant,
                &identity.key_id,
                identity.revision,
            )
            && now_ms().saturating_sub(identity.confirmed_at_ms) <= max_stale_ms
    }

    /// Whether `identity` was confirmed before this process started (it comes from Redis) while
    /// the watch has never caught up since the start: the change stream may have revoked it
    /// while this edge was away, and nothing here can tell. Such an identity is answered 503
    /// until the control plane can be asked.
    pub(super) fn unconfirmable(&self, identity: &Identity) -> bool {
        !self.versions.ever_synced() && identity.confirmed_at_ms < self.started_ms
    }

    /// An identity from Redis, under its `id:<hash>` key.
    pub(super) async fn l2_identity(&self, shared_key: Option<&str>) -> Option<Arc<Identity>> {
        let identity = self
            .shared
            .as_ref()?
            .get(shared_key?)
            .await
            .and_then(|b| pb::Identity::decode(b.as_slice()).ok())?;
        Some(Arc::new(Identity::from_pb(identity)))
    }

    /// What identities are cached under, in process and in Redis: an API key's hash; an
    /// access token's hash together with this edge's resource URL, because the control plane
    /// checked the token's audience against that URL — an edge with another resource URL
    /// sharing the Redis must not take the verdict over.
    pub(super) fn credential_id(&self, key: &str) -> KeyHash {
        if tp_proto::keys::looks_like_key(key) {
            key_hash(key)
        } else {
            key_hash(&format!("{}\n{key}", self.control.resource()))
        }
    }

    /// The identity of an API key or access token.
    pub async fn identity(&self, key: &str) -> Result<Arc<Identity>, LookupError> {
        if !tp_proto::keys::looks_like_credential(key) {
            return Err(LookupError::Unauthenticated);
        }
        if let Some(identity) = self.identity_l1(key).await {
            return Ok(identity);
        }
        let id = self.credential_id(key);
        let hash = hex::encode(id);
        let now = now_secs();
        let cached = self.identities.get(&id);
        if let Some((identity, loaded)) = &cached
            && self.young(*loaded)
            && self.current(identity, now)
        {
            hit("l1", "identity");
            self.fast_ids.insert(key, id);
            return Ok(Arc::clone(identity));
        }
        let cached = cached.map(|(identity, _)| identity);
        if self.refused_recently(&id) {
            return Err(LookupError::Unauthenticated);
        }
        let shared_key = self.shared.as_ref().map(|s| s.key(&["id", &hash]));
        let mut stale = cached;
        if let Some(identity) = self.l2_identity(shared_key.as_deref()).await {
            if self.current(&identity, now) {
                hit("l2", "identity");
                self.hold_identity(key, id, &identity);
                return Ok(identity);
            }
            stale.get_or_insert(identity);
        }
        hit("l3", "identity");
        match self.control.authenticate(key).await {
            Ok(identity) => Ok(self
                .confirmed(key, id, shared_key.as_deref(), identity)
                .await),
            Err(status) if status.code() == Code::Unauthenticated => {
                // A cached identity of the key stays, so that the edge still knows the key
                // changed (and refuses it) if the control plane becomes unreachable later.
                self.refused
                    .insert(id, (self.versions.head(), Instant::now()));
                Err(LookupError::Unauthenticated)
            }
            Err(status) => {
                if stale.is_none() {
                    // Nothing else to ask: give Redis a second chance (the first read may
                    // have timed out on a loaded or freshly connected edge).
                    stale = self.l2_identity(shared_key.as_deref()).await;
                    if stale.is_some() {
                        hit("l2_retry", "identity");
                    }
                }
                self.while_unreachable(key, id, stale, status.message(), now)
            }
        }
    }

    /// An identity the control plane just confirmed: shared (by credential, and by key id for
    /// revocation) and held in process.
    async fn confirmed(
        &self,
        key: &str,
        id: KeyHash,
        shared_key: Option<&str>,
        identity: pb::Identity,
    ) -> Arc<Identity> {
        let mut identity = Identity::from_pb(identity);
        identity.confirmed_at_ms = now_ms();
        let identity = Arc::new(identity);
        if let (Some(shared), Some(shared_key)) = (&self.shared, shared_key) {
            let by_key_id = shared.key(&["idk", &identity.key_id]);
            shared
                .set_many(
                    &[
                        (shared_key.to_owned(), identity.to_pb().encode_to_vec()),
                        (by_key_id, hex::encode(id).into_bytes()),
                    ],
                    self.settings.l2_ttl,
                )
                .await;
        }
        self.hold_identity(key, id, &identity);
        identity
    }

    /// Control plane unreachable: the last known good (`stale`), unless the edge has seen the
    /// key change (revoked, deleted) or its tenant deleted since, or it was last confirmed too
    /// long ago: revocation wins over availability.
    fn while_unreachable(
        &self,
        key: &str,
        id: KeyHash,
        stale: Option<Arc<Identity>>,
        reason: &str,
        now: u64,
    ) -> Result<Arc<Identity>, LookupError> {
        match stale {
            Some(identity) if self.trusted_while_unreachable(&identity, now) => {
                hit("l1_stale", "identity");
                self.hold_identity(key, id, &identity);
                Ok(identity)
            }
            Some(identity) if self.unconfirmable(&identity) && !identity.expired(now) => {
                metrics::counter!("tp_edge_unconfirmable_identities_total").increment(1);
                Err(LookupError::Unavailable(
                    "this edge has not caught up with the control plane's changes since it started, so it cannot confirm the key; retry once the control plane is reachable".into(),
                ))
            }
            Some(_) => {
                metrics::counter!("tp_edge_stale_identities_refused_total").increment(1);
                Err(LookupError::Unauthenticated)
            }
            None => Err(LookupError::Unavailable(reason.to_owned())),
        }
    }

    /// Drops what a change made stale that lazy revision checks cannot catch: the shared
    /// identities of the changed keys `key_ids` (a fresh edge could otherwise trust one during
    /// an outage). An identity resolved at or after `revision` already reflects the change and
    /// is kept — a fresh edge replays the change log from the start, and must not forget the
    /// keys it verified a moment ago (it would then have nothing to serve them from in an
    /// outage).
    ///
    /// Redis is read in pipelined batches of 256 keys (`FORGET_BATCH`): a bulk import is one
    /// change with every key in it, and an edge that starts replays it; one key after another,
    /// 100,000 keys kept it from catching up for minutes.
    pub async fn forget_keys(&self, key_ids: &[&str], revision: u64) {
        let Some(shared) = &self.shared else {
            return;
        };
        for (n, batch) in key_ids.chunks(FORGET_BATCH).enumerate() {
            if !self.forget_batch(shared, batch, revision).await {
                // Redis is not connected or did not answer: the next batches would each wait
                // out the command timeout as well. What is left stays in Redis until its TTL,
                // and the revision checks refuse it meanwhile.
                let unchecked = key_ids.len() - n * FORGET_BATCH;
                tracing::info!(
                    revision,
                    unchecked,
                    "the shared cache did not answer: the shared identities of up to `unchecked` of the change's keys were not checked"
                );
                return;
            }
        }
    }

    /// One batch of [`Caches::forget_keys`]; whether Redis answered its reads.
    async fn forget_batch(&self, shared: &Shared, batch: &[&str], revision: u64) -> bool {
        let by_key_id: Vec<String> = batch.iter().map(|id| shared.key(&["idk", id])).collect();
        let Some(found) = shared.get_many(&by_key_id).await else {
            return false;
        };
        let hashes: Vec<String> = found
            .into_iter()
            .flatten()
            .filter_map(|bytes| String::from_utf8(bytes).ok())
            .collect();
        if hashes.is_empty() {
            return true;
        }
        let shared_keys: Vec<String> = hashes
            .iter()
            .map(|hash| shared.key(&["id", hash]))
            .collect();
        // Unreadable (Redis failed in between): treated as stale, as a missing copy is.
        let read = shared.get_many(&shared_keys).await;
        let answered = read.is_some();
        let stored = read.unwrap_or_else(|| vec![None; shared_keys.len()]);
        let (mut stale, mut stale_ids) = (Vec::new(), Vec::new());
        for ((hash, shared_key), stored) in hashes.iter().zip(shared_keys).zip(stored) {
            let current = stored
                .and_then(|bytes| pb::Identity::decode(bytes.as_slice()).ok())
                .is_some_and(|identity| identity.revision >= revision);
            if !current {
                stale.push(shared_key);
                stale_ids.extend(key_hash_from_hex(hash));
            }
        }
        // Redis first, then L1: a lookup in between must not find the old copy in Redis and
        // bring it back into L1.
        shared.del_many(&stale).await;
        for id in stale_ids {
            if self
                .identities
                .get(&id)
                .is_none_or(|(identity, _)| identity.revision < revision)
            {
                self.identities.remove(&id);
            }
        }
        answered
    }
}
