//! Audit records: one per tool call, buffered and sent to the control plane in batches, where
//! they become the audit trail (`toolplanectl audit`). Records never hold argument values.
//!
//! Delivery is at least once: a batch the control plane did not acknowledge goes back to the
//! front of the buffer and is sent again. The buffer is bounded: when the control plane is
//! away long enough for it to fill, the oldest records are dropped — counted in
//! `tp_edge_audit_dropped_total` and reported with the next delivered batch, so the trail says
//! where it has gaps instead of hiding them. A batch the control plane refuses as malformed
//! (which a retry cannot fix) is dropped and counted the same way.

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
    /// Records dropped and not yet reported to the control plane.
    shed: AtomicU64,
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

    fn take(&self) -> Vec<pb::UsageRecord> {
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let n = buffer.len().min(BATCH);
        buffer.drain(..n).collect()
    }

    fn put_back(&self, records: Vec<pb::UsageRecord>) {
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let mut lost = 0;
        for record in records.into_iter().rev() {
            if buffer.len() >= self.capacity {
                lost += 1;
                continue;
            }
            buffer.push_front(record);
        }
        drop(buffer);
        if lost > 0 {
            self.dropped(lost);
        }
    }

    /// Sends batches every `period`, forever, as edge `edge`; spawn it.
    pub async fn run(self: Arc<Self>, control: Arc<ControlPlane>, period: Duration, edge: String) {
        let mut ticker = tokio::time::interval(period);
        loop {
            ticker.tick().await;
            loop {
                let batch = self.take();
                let shed = self.shed.load(Ordering::Relaxed);
                if batch.is_empty() && shed == 0 {
                    break;
                }
                let full = batch.len() == BATCH;
                let sent = batch.len() as u64;
                match control.report_usage(batch.clone(), &edge, shed).await {
                    Ok(()) => {
                        self.shed.fetch_sub(shed, Ordering::Relaxed);
                        metrics::counter!("tp_edge_audit_sent_total").increment(sent);
                    }
                    Err(status) if status.code() == Code::InvalidArgument => {
                        // Retrying cannot fix what the control plane finds malformed.
                        tracing::warn!(error = %status.message(), records = sent, "the control plane refused a batch of audit records; dropped");
                        self.dropped(sent);
                    }
                    Err(status) => {
                        tracing::debug!(error = %status.message(), "audit records not delivered; will retry");
                        self.put_back(batch);
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

    #[test]
    fn a_full_buffer_drops_the_oldest_and_counts_it() {
        let audit = Audit::new(2, true);
        for tool in ["a", "b", "c"] {
            audit.record(record(tool));
        }
        let kept: Vec<String> = audit.take().into_iter().map(|r| r.tool).collect();
        assert_eq!(kept, ["b", "c"]);
        assert_eq!(audit.shed.load(Ordering::Relaxed), 1);
        // A failed batch goes back in front of newer records, as far as room allows.
        audit.record(record("d"));
        audit.put_back(vec![record("b"), record("c")]);
        let kept: Vec<String> = audit.take().into_iter().map(|r| r.tool).collect();
        assert_eq!(kept, ["c", "d"]);
        assert_eq!(audit.shed.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_disabled_buffer_records_nothing() {
        let audit = Audit::new(2, false);
        audit.record(record("a"));
        assert!(audit.take().is_empty());
        assert_eq!(audit.shed.load(Ordering::Relaxed), 0);
    }
}
