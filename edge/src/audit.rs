//! Audit records: one per tool call, buffered and sent to the control plane in batches, where
//! they become the audit trail (`toolplanectl audit`). Records never hold argument values.
//!
//! Delivery is exactly once: each batch has an id and is kept, unchanged, until the control
//! plane acknowledges it; a retry (the acknowledgement was lost, or the control plane was away)
//! sends the same batch with the same id, and the control plane stores a batch id once. The
//! buffer behind it is bounded: when the control plane is away long enough for it to fill, the
//! oldest records are dropped — counted in `tp_edge_audit_dropped_total` and reported with the
//! next batch, so the trail says where it has gaps instead of hiding them. A batch the control
//! plane refuses as malformed (which a retry cannot fix) is dropped and counted the same way.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::Code;
use tp_proto::pb;

use crate::control::ControlPlane;

/// Most records per `ReportUsage` call (the control plane's limit).
const BATCH: usize = 1000;

/// The audit buffer.
#[derive(Debug)]
pub struct Audit {
    buffer: Mutex<VecDeque<pb::UsageRecord>>,
    capacity: usize,
    enabled: bool,
    /// Records dropped and not yet put in a batch.
    shed: AtomicU64,
    /// The batch being delivered, until the control plane acknowledges it.
    pending: Mutex<Option<Batch>>,
}

/// One delivery, resent as it is until acknowledged.
#[derive(Debug, Clone)]
struct Batch {
    id: String,
    records: Vec<pb::UsageRecord>,
    /// The shed count it reports (taken out of [`Audit::shed`] when the batch was made).
    shed: u64,
}

// === impl Audit ===

impl Audit {
    /// A buffer of `capacity` records; `enabled = false` records nothing.
    pub fn new(capacity: usize, enabled: bool) -> Arc<Audit> {
        Arc::new(Audit {
            buffer: Mutex::new(VecDeque::new()),
            capacity,
            enabled,
            shed: AtomicU64::new(0),
            pending: Mutex::new(None),
        })
    }

    /// Records one call.
    pub fn record(&self, record: pb::UsageRecord) {
        if !self.enabled {
            return;
        }
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        if buffer.len() >= self.capacity {
            buffer.pop_front();
            self.dropped(1);
        }
        buffer.push_back(record);
    }

    fn dropped(&self, records: u64) {
        self.shed.fetch_add(records, Ordering::Relaxed);
        metrics::counter!("tp_edge_audit_dropped_total").increment(records);
    }

    /// The batch to deliver now: the unacknowledged one, else a new one from the buffer (with
    /// the shed count so far); `None` when there is nothing to report.
    fn next_batch(&self) -> Option<Batch> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.is_none() {
            let records: Vec<pb::UsageRecord> = {
                let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
                let n = buffer.len().min(BATCH);
                buffer.drain(..n).collect()
            };
            let shed = self.shed.swap(0, Ordering::Relaxed);
            if records.is_empty() && shed == 0 {
                return None;
            }
            *pending = Some(Batch {
                id: hex::encode(rand::random::<[u8; 16]>()),
                records,
                shed,
            });
        }
        pending.clone()
    }

    /// The control plane took `batch` (stored it, or had stored it before): the next one is new.
    fn delivered(&self, batch: &Batch) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.as_ref().is_some_and(|p| p.id == batch.id) {
            *pending = None;
        }
    }

    /// Sends batches every `period`, forever, as edge `edge`; spawn it.
    pub async fn run(self: Arc<Self>, control: Arc<ControlPlane>, period: Duration, edge: String) {
        let mut ticker = tokio::time::interval(period);
        loop {
            ticker.tick().await;
            while let Some(batch) = self.next_batch() {
                let full = batch.records.len() == BATCH;
                let sent = batch.records.len() as u64;
                match control
                    .report_usage(batch.records.clone(), &edge, batch.shed, &batch.id)
                    .await
                {
                    Ok(duplicate) => {
                        self.delivered(&batch);
                        if duplicate {
                            tracing::info!(batch_id = %batch.id, "the control plane had this audit batch already (an acknowledgement was lost)");
                        } else {
                            metrics::counter!("tp_edge_audit_sent_total").increment(sent);
                        }
                    }
                    Err(status) if status.code() == Code::InvalidArgument => {
                        // Retrying cannot fix what the control plane finds malformed.
                        tracing::warn!(error = %status.message(), records = sent, "the control plane refused a batch of audit records; dropped");
                        self.delivered(&batch);
                        self.shed.fetch_add(batch.shed, Ordering::Relaxed);
                        self.dropped(sent);
                    }
                    Err(status) => {
                        tracing::debug!(error = %status.message(), batch_id = %batch.id, "audit records not delivered; will resend the same batch");
                        break;
                    }
                }
                if !full {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tool: &str) -> pb::UsageRecord {
        pb::UsageRecord {
            tenant: "acme".into(),
            tool: tool.into(),
            ..Default::default()
        }
    }

    fn tools(batch: &Batch) -> Vec<&str> {
        batch.records.iter().map(|r| r.tool.as_str()).collect()
    }

    #[test]
    fn a_full_buffer_drops_the_oldest_and_counts_it() {
        let audit = Audit::new(2, true);
        for tool in ["a", "b", "c"] {
            audit.record(record(tool));
        }
        let batch = audit.next_batch().unwrap();
        assert_eq!(tools(&batch), ["b", "c"]);
        assert_eq!(batch.shed, 1, "the shed count travels with the batch");
        assert_eq!(audit.shed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_unacknowledged_batch_is_resent_as_it_was_and_newer_records_wait() {
        let audit = Audit::new(2, true);
        audit.record(record("a"));
        let first = audit.next_batch().unwrap();
        // Not acknowledged: the same batch, same id, even with newer records in the buffer
        // (which fill up and shed meanwhile, counted for the next batch).
        for tool in ["b", "c", "d"] {
            audit.record(record(tool));
        }
        let again = audit.next_batch().unwrap();
        assert_eq!(
            (again.id.as_str(), tools(&again)),
            (first.id.as_str(), vec!["a"])
        );
        // Acknowledged: the next batch is new, with the newer records and the shed count.
        audit.delivered(&again);
        let next = audit.next_batch().unwrap();
        assert_ne!(next.id, first.id);
        assert_eq!((tools(&next), next.shed), (vec!["c", "d"], 1));
        // A stale acknowledgement does not drop the batch in flight.
        audit.delivered(&first);
        assert_eq!(audit.next_batch().unwrap().id, next.id);
        audit.delivered(&next);
        assert!(audit.next_batch().is_none());
    }

    #[test]
    fn a_disabled_buffer_records_nothing() {
        let audit = Audit::new(2, false);
        audit.record(record("a"));
        assert!(audit.next_batch().is_none());
        assert_eq!(audit.shed.load(Ordering::Relaxed), 0);
    }
}
