//! Audit records: one per tool call, buffered and sent to the control plane in batches.
//! Bounded: when the control plane is away and the buffer is full, the oldest records are
//! dropped and counted (`tp_edge_audit_dropped_total`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}

// === impl Audit ===

impl Audit {
    /// A buffer of `capacity` records; `enabled = false` records nothing.
    pub fn new(capacity: usize, enabled: bool) -> Arc<Audit> {
        Arc::new(Audit {
            buffer: Mutex::new(VecDeque::new()),
            capacity,
            enabled,
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
            metrics::counter!("tp_edge_audit_dropped_total").increment(1);
        }
        buffer.push_back(record);
    }

    fn take(&self) -> Vec<pb::UsageRecord> {
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let n = buffer.len().min(BATCH);
        buffer.drain(..n).collect()
    }

    fn put_back(&self, records: Vec<pb::UsageRecord>) {
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        for record in records.into_iter().rev() {
            if buffer.len() >= self.capacity {
                metrics::counter!("tp_edge_audit_dropped_total").increment(1);
                break;
            }
            buffer.push_front(record);
        }
    }

    /// Sends batches every `period`, forever; spawn it.
    pub async fn run(self: Arc<Self>, control: Arc<ControlPlane>, period: Duration) {
        let mut ticker = tokio::time::interval(period);
        loop {
            ticker.tick().await;
            loop {
                let batch = self.take();
                if batch.is_empty() {
                    break;
                }
                let full = batch.len() == BATCH;
                if let Err(status) = control.report_usage(batch.clone()).await {
                    tracing::debug!(error = %status.message(), "audit records not delivered; will retry");
                    self.put_back(batch);
                    break;
                }
                metrics::counter!("tp_edge_audit_sent_total").increment(batch.len() as u64);
                if !full {
                    break;
                }
            }
        }
    }
}
