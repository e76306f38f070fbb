//! What the edge knows about the control plane's revisions, from the watch stream: the last
//! revision that changed every registry (catalogue-wide objects) and, per tenant, the last
//! revision that changed that tenant (its settings or keys). A cached registry or identity
//! resolved at revision `r` is current iff `r >= required(tenant)`.
//!
//! It also remembers, whether or not the watch is caught up, the last revision that changed
//! each API key and each deleted tenant: a cached identity older than such a change is never
//! served again, not even as the last known good while the control plane is unreachable
//! (revocation wins over availability).

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

/// By tenant name or key id. The names come from the control plane's change stream, not from
/// clients, so foldhash (seeded per process, cheaper than std's SipHash) serves: these maps are
/// read on every request.
type ByName = HashMap<String, u64, foldhash::fast::RandomState>;

use tp_proto::pb;

/// Revisions known from the watch stream.
#[derive(Debug, Default)]
pub struct Versions {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    synced: bool,
    /// Whether the watch has been caught up at least once since this process started.
    ever_synced: bool,
    head: u64,
    global: u64,
    tenants: ByName,
    /// Key id → the last revision that changed (revoked, deleted, re-issued) the key.
    keys: ByName,
    /// Tenant → the last revision that deleted it.
    deleted: ByName,
}

impl Inner {
    fn required(&self, tenant: &str) -> Option<u64> {
        self.synced.then(|| {
            self.global
                .max(self.tenants.get(tenant).copied().unwrap_or(0))
        })
    }

    fn key_changed_after(&self, tenant: &str, key_id: &str, revision: u64) -> bool {
        self.keys.get(key_id).is_some_and(|&r| r > revision)
            || self.deleted.get(tenant).is_some_and(|&r| r > revision)
    }
}

/// What a change invalidated.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Invalidated {
    /// Every registry.
    pub all: bool,
    /// These tenants' registries and identities.
    pub tenants: Vec<String>,
}

fn affects_all(kind: i32) -> bool {
    match pb::ObjectKind::try_from(kind) {
        Ok(
            pb::ObjectKind::Tool
            | pb::ObjectKind::Executor
            | pb::ObjectKind::Provider
            | pb::ObjectKind::Role,
        ) => true,
        Ok(
            pb::ObjectKind::Adr
            | pb::ObjectKind::Policy
            | pb::ObjectKind::Tenant
            | pb::ObjectKind::ApiKey
            | pb::ObjectKind::AdminToken
            | pb::ObjectKind::Connection,
        ) => false,
        // Unknown kinds from a newer control plane: be safe.
        Ok(pb::ObjectKind::Unspecified) | Err(_) => true,
    }
}

// === impl Versions ===

impl Versions {
    /// The revision a cached entry of `tenant` must have reached, or `None` while the watch is
    /// not caught up (then only last-known-good entries can be served).
    pub fn required(&self, tenant: &str) -> Option<u64> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .required(tenant)
    }

    /// Whether something changed key `key_id` or deleted `tenant` after `revision`: an identity
    /// resolved at `revision` must then not be trusted without asking the control plane again.
    pub fn key_changed_after(&self, tenant: &str, key_id: &str, revision: u64) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .key_changed_after(tenant, key_id, revision)
    }

    /// [`Versions::required`] of `tenant` and [`Versions::key_changed_after`] of an identity
    /// resolved at `revision`, read under one lock (the check every request's caller takes).
    pub fn identity_check(&self, tenant: &str, key_id: &str, revision: u64) -> (Option<u64>, bool) {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        (
            inner.required(tenant),
            inner.key_changed_after(tenant, key_id, revision),
        )
    }

    /// The last revision seen.
    pub fn head(&self) -> u64 {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).head
    }

    /// Whether the watch is live and caught up.
    pub fn synced(&self) -> bool {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).synced
    }

    /// Marks the stream caught up (a heartbeat at our head) or lost.
    pub fn set_synced(&self, synced: bool) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.synced = synced;
        inner.ever_synced |= synced;
    }

    /// Whether the watch has been caught up at least once since this process started: only
    /// then does the edge know of every key change up to the moment it lost the stream.
    pub fn ever_synced(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .ever_synced
    }

    /// Records one committed change.
    pub fn apply(&self, change: &pb::Change) -> Invalidated {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let mut invalidated = Invalidated::default();
        // Each tenant once, in the order first named: a bulk import is one change of 200,000
        // items over 100,000 tenants, and a scan of the list per item held this lock (and
        // every request's revision check) for tens of seconds.
        let mut named = HashSet::new();
        for item in &change.items {
            if affects_all(item.kind) {
                inner.global = change.revision;
                invalidated.all = true;
            } else if !item.tenant.is_empty() {
                match pb::ObjectKind::try_from(item.kind) {
                    Ok(pb::ObjectKind::ApiKey) => {
                        inner.keys.insert(item.key.clone(), change.revision);
                    }
                    Ok(pb::ObjectKind::Tenant) if item.op == pb::ChangeOp::Delete as i32 => {
                        inner.deleted.insert(item.tenant.clone(), change.revision);
                    }
                    _ => {}
                }
                inner.tenants.insert(item.tenant.clone(), change.revision);
                if named.insert(item.tenant.as_str()) {
                    invalidated.tenants.push(item.tenant.clone());
                }
            }
        }
        inner.head = inner.head.max(change.revision);
        invalidated
    }

    /// Forgets everything (the control plane's log no longer matches ours).
    pub fn reset(&self) {
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = Inner::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(revision: u64, kind: pb::ObjectKind, tenant: &str) -> pb::Change {
        pb::Change {
            revision,
            items: vec![pb::ChangeItem {
                kind: kind as i32,
                key: "k".into(),
                op: 1,
                tenant: tenant.into(),
                verb: "put".into(),
            }],
            committed_at_ms: 0,
            author: String::new(),
        }
    }

    #[test]
    fn tenant_changes_are_precise_and_catalogue_changes_global() {
        let versions = Versions::default();
        assert_eq!(versions.required("acme"), None);
        versions.set_synced(true);
        assert_eq!(versions.required("acme"), Some(0));
        let hit = versions.apply(&change(5, pb::ObjectKind::Tenant, "acme"));
        assert_eq!(
            hit,
            Invalidated {
                all: false,
                tenants: vec!["acme".into()]
            }
        );
        assert_eq!(
            (versions.required("acme"), versions.required("globex")),
            (Some(5), Some(0))
        );
        versions.apply(&change(6, pb::ObjectKind::Adr, ""));
        assert_eq!(
            versions.required("globex"),
            Some(0),
            "ADRs change no registry"
        );
        assert!(versions.apply(&change(7, pb::ObjectKind::Tool, "")).all);
        assert_eq!(
            (versions.required("acme"), versions.required("globex")),
            (Some(7), Some(7))
        );
        versions.apply(&change(8, pb::ObjectKind::ApiKey, "globex"));
        assert_eq!(
            (versions.required("acme"), versions.required("globex")),
            (Some(7), Some(8))
        );
        assert_eq!(versions.head(), 8);
        versions.set_synced(false);
        assert_eq!(versions.required("acme"), None);
    }

    #[test]
    fn a_change_of_many_items_names_each_tenant_once_in_the_order_first_named() {
        let versions = Versions::default();
        let mut bulk = change(3, pb::ObjectKind::Tenant, "b");
        for (kind, tenant) in [
            (pb::ObjectKind::ApiKey, "b"),
            (pb::ObjectKind::Tenant, "a"),
            (pb::ObjectKind::ApiKey, "a"),
            (pb::ObjectKind::ApiKey, "c"),
            (pb::ObjectKind::Tenant, "b"),
        ] {
            bulk.items.push(change(3, kind, tenant).items.remove(0));
        }
        assert_eq!(
            versions.apply(&bulk),
            Invalidated {
                all: false,
                tenants: vec!["b".into(), "a".into(), "c".into()]
            }
        );
        assert_eq!(versions.head(), 3);
    }

    /// The size of the benchmark's import: 100,000 tenants, each with a key, each named once.
    /// With a scan of the list per item this took 87 s on the debug build (nextest marks it
    /// SLOW), against 0.4 s in one pass; the time is the benchmark's to bound (`scale`: a
    /// fresh edge synced within 10 s of an import of 100,000 keys).
    #[test]
    fn a_bulk_import_applies_in_one_pass_over_its_items() {
        let versions = Versions::default();
        let mut bulk = change(1, pb::ObjectKind::Tenant, "t0");
        bulk.items.clear();
        for i in 0..100_000 {
            let tenant = format!("t{i}");
            for kind in [pb::ObjectKind::Tenant, pb::ObjectKind::ApiKey] {
                let mut item = change(1, kind, &tenant).items.remove(0);
                item.key = format!("{tenant}-{}", kind as i32);
                bulk.items.push(item);
            }
        }
        let hit = versions.apply(&bulk);
        assert_eq!(hit.tenants.len(), 100_000);
        assert_eq!(
            (hit.tenants[0].as_str(), hit.tenants[99_999].as_str()),
            ("t0", "t99999")
        );
        versions.set_synced(true);
        assert_eq!(versions.required("t54321"), Some(1));
    }

    #[test]
    fn key_changes_and_tenant_deletions_are_remembered_while_not_synced() {
        let versions = Versions::default();
        let mut revoke = change(4, pb::ObjectKind::ApiKey, "acme");
        revoke.items[0].key = "key_1".into();
        versions.apply(&revoke);
        assert!(versions.key_changed_after("acme", "key_1", 3));
        assert!(!versions.key_changed_after("acme", "key_1", 4));
        assert!(!versions.key_changed_after("acme", "key_2", 3));
        let mut delete = change(9, pb::ObjectKind::Tenant, "globex");
        delete.items[0].op = pb::ChangeOp::Delete as i32;
        versions.apply(&delete);
        assert!(versions.key_changed_after("globex", "key_9", 8));
        assert!(!versions.key_changed_after("globex", "key_9", 9));
        // An update of a tenant is not a deletion.
        versions.apply(&change(10, pb::ObjectKind::Tenant, "acme"));
        assert!(!versions.key_changed_after("acme", "key_2", 5));
    }
}
