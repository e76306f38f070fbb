//! Audit records: one per tool call, buffered and sent to the control plane in batches, where
//! they become the audit trail (`toolplanectl audit`). Records never hold argument values.
//!
//! Delivery is exactly once: each batch has an id and is kept, unchanged, until the control
//! plane acknowledges it; a retry (the acknowledgement was lost, the control plane was away,
//! the edge restarted) sends the same batch with the same id, and the control plane stores a
//! batch id once.
//!
//! What survives a stop: every `flush_ms` the records answered since the last tick become a
//! batch; with `audit.spill_dir` set, the batch is appended to this process's spill file (and
//! synced to disk) *before* it is sent, and the file is emptied once every batch in it has been
//! acknowledged. A graceful stop finishes the requests in flight, makes a last batch and tries
//! to deliver what is queued for `audit.stop_flush_ms`; what is still undelivered stays in the
//! file. The next edge to start with the same `spill_dir` adopts every spill file no live
//! process holds (a file lock tells) and sends those batches first, with their ids. So a
//! graceful stop loses nothing, and `kill -9` loses at most the calls answered since the last
//! tick (`flush_ms`, one second by default).
//!
//! What is bounded: at most `audit.buffer` records wait in memory; when the control plane is
//! away long enough for more to pile up, the oldest batches are dropped — counted in
//! `tp_edge_audit_dropped_total` and reported with the next batch, so the trail says where it
//! has gaps instead of hiding them. A spill file stops growing at `audit.spill_max_mb` (later
//! batches wait in memory only). A batch the control plane refuses as malformed (which a retry
//! cannot fix) is dropped and counted the same way.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tp_proto::pb;

use crate::control::ControlPlane;

/// Most records per `ReportUsage` call (the control plane's limit).
const BATCH: usize = 1000;

/// How the audit buffer is set up (`[audit]`).
#[derive(Debug, Clone)]
pub struct AuditSettings {
    /// Record anything at all.
    pub enabled: bool,
    /// Most records waiting in memory.
    pub capacity: usize,
    /// Where undelivered batches are kept across stops; `None` = memory only.
    pub spill_dir: Option<PathBuf>,
    /// Largest spill file.
    pub spill_max_bytes: u64,
    /// The edge's name, sent with each batch.
    pub edge: String,
}

/// The audit buffer.
#[derive(Debug)]
pub struct Audit {
    settings: AuditSettings,
    /// Records answered since the last tick.
    buffer: Mutex<VecDeque<pb::UsageRecord>>,
    /// Records dropped and not yet reported in a batch.
    shed: AtomicU64,
    /// Batches made and not yet acknowledged, oldest first.
    queue: Mutex<Queue>,
    /// This process's spill file, when spilling.
    spill: Option<Mutex<Spill>>,
}

#[derive(Debug, Default)]
struct Queue {
    /// Shared with the delivery under way (which must not hold the queue's lock while it
    /// sends): the one copy of each record is the one sent.
    batches: VecDeque<Arc<pb::ReportUsageRequest>>,
    /// Records in `batches`.
    records: usize,
}

/// An append-only file of length-delimited `ReportUsageRequest`s, locked by this process.
#[derive(Debug)]
struct Spill {
    path: PathBuf,
    file: File,
    bytes: u64,
    /// Batches appended after the file reached its limit (they wait in memory only).
    overflowed: bool,
    /// Files of edges that are gone, held (and locked) until their batches are in this one.
    orphans: Vec<(PathBuf, File)>,
}

/// What [`Audit::finish`] did with what was left at a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Finished {
    /// Records the control plane acknowledged during the stop.
    pub delivered: u64,
    /// Records left in the spill file for the next start.
    pub kept: u64,
    /// Records lost (no spill file, or it was full).
    pub lost: u64,
}

// === impl Audit ===

impl Audit {
    /// A memory-only buffer of `capacity` records; `enabled = false` records nothing.
    pub fn new(capacity: usize, enabled: bool) -> Arc<Audit> {
        Audit::open(AuditSettings {
            enabled,
            capacity,
            spill_dir: None,
            spill_max_bytes: 0,
            edge: String::new(),
        })
        .expect("a memory-only buffer opens no file")
    }

    /// The buffer `settings` describe. With a spill directory: creates it (0700), opens this
    /// process's spill file and adopts the batches of every spill file no live process holds
    /// (they are sent first, with their ids).
    pub fn open(settings: AuditSettings) -> anyhow::Result<Arc<Audit>> {
        let mut queue = Queue::default();
        let spill = match (&settings.spill_dir, settings.enabled) {
            (Some(dir), true) => {
                let (spill, adopted) = Spill::open(dir)?;
                for batch in adopted {
                    queue.records += batch.records.len();
                    queue.batches.push_back(Arc::new(batch));
                }
                Some(Mutex::new(spill))
            }
            _ => None,
        };
        let audit = Audit {
            settings,
            buffer: Mutex::new(VecDeque::new()),
            shed: AtomicU64::new(0),
            queue: Mutex::new(Queue::default()),
            spill,
        };
        if !queue.batches.is_empty() {
            let (batches, records) = (queue.batches.len(), queue.records);
            // Into this process's own file first: the adopted files are deleted after.
            let mut spill = audit.spill.as_ref().map(|s| lock(s));
            if let Some(spill) = spill.as_deref_mut() {
                for batch in &queue.batches {
                    spill.append(batch, u64::MAX);
                }
                spill.sync();
            }
            drop(spill);
            tracing::info!(
                batches,
                records,
                "audit batches left by an earlier edge were adopted; they are sent first"
            );
            metrics::counter!("tp_edge_audit_adopted_total").increment(records as u64);
            *lock(&audit.queue) = queue;
        }
        if let Some(spill) = &audit.spill {
            lock(spill).delete_adopted();
        }
        audit.gauge();
        Ok(Arc::new(audit))
    }

    /// Records one call.
    pub fn record(&self, record: pb::UsageRecord) {
        if !self.settings.enabled {
            return;
        }
        let mut buffer = lock(&self.buffer);
        if buffer.len() >= self.settings.capacity {
            buffer.pop_front();
            self.dropped(1);
        }
        buffer.push_back(record);
    }

    fn dropped(&self, records: u64) {
        self.shed.fetch_add(records, Ordering::Relaxed);
        metrics::counter!("tp_edge_audit_dropped_total").increment(records);
    }

    fn gauge(&self) {
        let waiting = lock(&self.queue).records + lock(&self.buffer).len();
        metrics::gauge!("tp_edge_audit_waiting_records").set(waiting as f64);
    }

    /// Turns the records answered since the last tick into batches at the end of the queue
    /// (on disk first, when spilling), and drops the oldest batches beyond the capacity.
    fn cut(&self) {
        let records = Vec::from(std::mem::take(&mut *lock(&self.buffer)));
        let mut shed = self.shed.swap(0, Ordering::Relaxed);
        if records.is_empty() && shed == 0 {
            return;
        }
        // The records move into their batches (copying them cost a tenth of a `tools/call`).
        let mut made = Vec::new();
        let mut records = records;
        if records.is_empty() {
            made.push(self.batch(Vec::new(), shed));
        }
        while !records.is_empty() {
            let rest = records.split_off(records.len().min(BATCH));
            let chunk = std::mem::replace(&mut records, rest);
            made.push(self.batch(chunk, std::mem::take(&mut shed)));
        }
        if let Some(spill) = &self.spill {
            let mut spill = lock(spill);
            for batch in &made {
                spill.append(batch, self.settings.spill_max_bytes);
            }
            spill.sync();
        }
        let mut queue = lock(&self.queue);
        for batch in made {
            queue.records += batch.records.len();
            queue.batches.push_back(Arc::new(batch));
        }
        // Over capacity: the oldest go (never the last, which holds the newest records).
        while queue.records > self.settings.capacity && queue.batches.len() > 1 {
            let oldest = queue.batches.pop_front().expect("more than one batch");
            queue.records -= oldest.records.len();
            self.shed.fetch_add(oldest.shed, Ordering::Relaxed);
            self.dropped(oldest.records.len() as u64);
        }
    }

    fn batch(&self, records: Vec<pb::UsageRecord>, shed: u64) -> pb::ReportUsageRequest {
        pb::ReportUsageRequest {
            records,
            shed,
            edge: self.settings.edge.clone(),
            batch_id: hex::encode(rand::random::<[u8; 16]>()),
        }
    }

    /// The oldest unacknowledged batch.
    fn front(&self) -> Option<Arc<pb::ReportUsageRequest>> {
        lock(&self.queue).batches.front().cloned()
    }

    /// The control plane took the batch `id` (stored it, or had stored it before). Once
    /// nothing is left to send, the spill file is emptied.
    fn delivered(&self, id: &str) {
        let mut queue = lock(&self.queue);
        if queue.batches.front().is_some_and(|b| b.batch_id == id) {
            let batch = queue.batches.pop_front().expect("a front batch");
            queue.records -= batch.records.len();
        }
        if queue.batches.is_empty()
            && let Some(spill) = &self.spill
        {
            lock(spill).clear();
        }
    }

    /// Sends what the queue holds, oldest first, until it is empty or a call fails; returns
    /// the records acknowledged and whether the queue emptied.
    async fn deliver(&self, control: &ControlPlane) -> (u64, bool) {
        let mut acknowledged = 0;
        // The queue keeps the batch until the control plane acknowledges it; it is sent from
        // there (copied once per attempt, into the request).
        while let Some(batch) = self.front() {
            let pb::ReportUsageRequest {
                records,
                shed,
                batch_id,
                ..
            } = &*batch;
            let (sent, shed) = (records.len() as u64, *shed);
            match control.report_usage(&batch).await {
                Ok(duplicate) => {
                    self.delivered(batch_id);
                    acknowledged += sent;
                    if duplicate {
                        tracing::info!(%batch_id, "the control plane had this audit batch already (an acknowledgement was lost, or the edge stopped before it was recorded)");
                    } else {
                        metrics::counter!("tp_edge_audit_sent_total").increment(sent);
                    }
                }
                Err(status) if status.code() == Code::InvalidArgument => {
                    // Retrying cannot fix what the control plane finds malformed.
                    tracing::warn!(error = %status.message(), records = sent, "the control plane refused a batch of audit records; dropped");
                    self.delivered(batch_id);
                    self.shed.fetch_add(shed, Ordering::Relaxed);
                    self.dropped(sent);
                }
                Err(status) => {
                    tracing::debug!(error = %status.message(), batch_id = %batch_id, "audit records not delivered; will resend the same batch");
                    return (acknowledged, false);
                }
            }
        }
        (acknowledged, true)
    }

    /// Every `period`: cuts a batch and delivers the queue, until `stop` is cancelled. Spawn
    /// it, then call [`Audit::finish`] once the requests in flight are answered.
    pub async fn run(
        self: Arc<Self>,
        control: Arc<ControlPlane>,
        period: Duration,
        stop: CancellationToken,
    ) {
        let mut ticker = tokio::time::interval(period);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            self.cut();
            tokio::select! {
                () = stop.cancelled() => return,
                _ = self.deliver(&control) => {}
            }
            self.gauge();
        }
    }

    /// At a stop, after the last request was answered: cuts the last batch and delivers what
    /// is queued for at most `within`; the rest stays in the spill file (or, without one, is
    /// lost and counted).
    pub async fn finish(&self, control: &ControlPlane, within: Duration) -> Finished {
        if !self.settings.enabled {
            return Finished::default();
        }
        self.cut();
        let delivered = tokio::time::timeout(within, self.deliver(control))
            .await
            .map_or(0, |(acknowledged, _)| acknowledged);
        let left = lock(&self.queue).records as u64;
        let mut finished = Finished {
            delivered,
            ..Finished::default()
        };
        match &self.spill {
            Some(spill) if !lock(spill).overflowed => finished.kept = left,
            Some(_) => {
                // Some batches never reached the file: which ones, the queue no longer says.
                finished.lost = left;
                self.dropped(left);
            }
            None => {
                finished.lost = left;
                self.dropped(left);
            }
        }
        if finished.kept > 0 {
            let file = self.spill_path().unwrap_or_default();
            tracing::warn!(records = finished.kept, file = %file.display(), "the control plane did not take every audit record before the stop; the rest wait in the spill file for the next edge started with this audit.spill_dir");
        }
        if finished.lost > 0 {
            tracing::error!(
                records = finished.lost,
                "audit records lost at the stop (the control plane was away and audit.spill_dir is not set, or its file was full); counted in tp_edge_audit_dropped_total"
            );
        }
        self.gauge();
        finished
    }

    /// This process's spill file.
    pub fn spill_path(&self) -> Option<PathBuf> {
        self.spill.as_ref().map(|s| lock(s).path.clone())
    }
}

// === impl Spill ===

impl Spill {
    /// Opens a new, locked spill file in `dir` and reads (and locks) the files of edges that
    /// are gone; returns their batches. Those files are deleted by [`Spill::delete_adopted`]
    /// once their batches are in the new file.
    fn open(dir: &Path) -> anyhow::Result<(Spill, Vec<pb::ReportUsageRequest>)> {
        use anyhow::Context;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("audit.spill_dir {}: creating it", dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let mut adopted = Vec::new();
        let mut orphans = Vec::new();
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("audit.spill_dir {}: reading it", dir.display()))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_spill_file(p))
            .collect();
        paths.sort();
        for path in paths {
            let Ok(mut file) = File::options().read(true).write(true).open(&path) else {
                continue;
            };
            if file.try_lock().is_err() {
                continue; // a live edge's file
            }
            let mut bytes = Vec::new();
            if let Err(error) = file.read_to_end(&mut bytes) {
                tracing::warn!(%error, file = %path.display(), "an audit spill file could not be read; left in place");
                continue;
            }
            let (batches, torn) = decode(&bytes);
            if torn {
                tracing::warn!(file = %path.display(), "an audit spill file ends in a partly written batch (the edge was killed while writing it); that batch is lost");
            }
            adopted.extend(batches);
            orphans.push((path, file));
        }
        let path = dir.join(format!(
            "audit-{}-{}.spill",
            std::process::id(),
            hex::encode(rand::random::<[u8; 4]>())
        ));
        let file = File::options()
            .create_new(true)
            .append(true)
            .read(true)
            .open(&path)
            .with_context(|| format!("audit.spill_dir: creating {}", path.display()))?;
        file.try_lock()
            .map_err(|e| anyhow::anyhow!("locking {}: {e}", path.display()))?;
        let spill = Spill {
            path,
            file,
            bytes: 0,
            overflowed: false,
            orphans,
        };
        Ok((spill, adopted))
    }

    fn delete_adopted(&mut self) {
        for (path, file) in self.orphans.drain(..) {
            if let Err(error) = std::fs::remove_file(&path) {
                tracing::warn!(%error, file = %path.display(), "an adopted audit spill file could not be deleted; its batches may be sent again (the control plane stores a batch once)");
            }
            drop(file);
        }
    }

    /// Appends `batch` unless the file would pass `max` bytes.
    fn append(&mut self, batch: &pb::ReportUsageRequest, max: u64) {
        let bytes = batch.encode_length_delimited_to_vec();
        if self.bytes + bytes.len() as u64 > max {
            if !self.overflowed {
                tracing::warn!(file = %self.path.display(), "the audit spill file is full (audit.spill_max_mb); newer batches wait in memory only");
            }
            self.overflowed = true;
            return;
        }
        match self.file.write_all(&bytes) {
            Ok(()) => self.bytes += bytes.len() as u64,
            Err(error) => {
                tracing::warn!(%error, file = %self.path.display(), "writing the audit spill file failed; the batch waits in memory only");
                self.overflowed = true;
            }
        }
    }

    fn sync(&mut self) {
        if let Err(error) = self.file.sync_data() {
            tracing::warn!(%error, file = %self.path.display(), "syncing the audit spill file failed");
        }
    }

    /// Everything in the file was acknowledged.
    fn clear(&mut self) {
        if self.bytes == 0 && !self.overflowed {
            return;
        }
        let cleared = self
            .file
            .set_len(0)
            .and_then(|()| self.file.rewind())
            .and_then(|()| self.file.sync_data());
        match cleared {
            Ok(()) => {
                self.bytes = 0;
                self.overflowed = false;
            }
            Err(error) => {
                tracing::warn!(%error, file = %self.path.display(), "emptying the audit spill file failed; its batches may be sent again (the control plane stores a batch once)");
            }
        }
    }
}

fn is_spill_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("audit-") && n.ends_with(".spill"))
}

/// The batches in a spill file's bytes, and whether it ends in a partial one.
fn decode(mut bytes: &[u8]) -> (Vec<pb::ReportUsageRequest>, bool) {
    let mut batches = Vec::new();
    while !bytes.is_empty() {
        match pb::ReportUsageRequest::decode_length_delimited(&mut bytes) {
            Ok(batch) => batches.push(batch),
            Err(_) => return (batches, true),
        }
    }
    (batches, false)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

    fn tools(batch: &pb::ReportUsageRequest) -> Vec<&str> {
        batch.records.iter().map(|r| r.tool.as_str()).collect()
    }

    fn spilling(dir: &Path, capacity: usize) -> Arc<Audit> {
        Audit::open(AuditSettings {
            enabled: true,
            capacity,
            spill_dir: Some(dir.to_owned()),
            spill_max_bytes: 1 << 20,
            edge: "e1".into(),
        })
        .unwrap()
    }

    #[test]
    fn a_full_buffer_drops_the_oldest_and_counts_it() {
        let audit = Audit::new(2, true);
        for tool in ["a", "b", "c"] {
            audit.record(record(tool));
        }
        audit.cut();
        let batch = audit.front().unwrap();
        assert_eq!(tools(&batch), ["b", "c"]);
        assert_eq!(batch.shed, 1, "the shed count travels with the batch");
        assert_eq!(audit.shed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_unacknowledged_batch_is_resent_as_it_was_and_newer_records_wait() {
        let audit = Audit::new(2, true);
        audit.record(record("a"));
        audit.cut();
        let first = audit.front().unwrap();
        // Not acknowledged: the same batch, same id, first; newer records queue behind it,
        // and past the capacity the oldest batch goes (counted for the next batch).
        audit.record(record("b"));
        audit.cut();
        assert_eq!(audit.front().unwrap().batch_id, first.batch_id);
        for tool in ["c", "d"] {
            audit.record(record(tool));
        }
        audit.cut();
        let front = audit.front().unwrap();
        assert_ne!(
            front.batch_id, first.batch_id,
            "over capacity: the oldest went"
        );
        assert_eq!(tools(&front), ["c", "d"], "both older batches went");
        // A stale acknowledgement does not drop the batch in front.
        audit.delivered(&first.batch_id);
        assert_eq!(audit.front().unwrap().batch_id, front.batch_id);
        audit.delivered(&front.batch_id);
        assert!(audit.front().is_none());
        audit.cut();
        assert_eq!(
            audit.front().map(|b| (b.records.len(), b.shed)),
            Some((0, 2)),
            "the gap is reported even with no new records"
        );
    }

    #[test]
    fn a_disabled_buffer_records_nothing() {
        let audit = Audit::new(2, false);
        audit.record(record("a"));
        audit.cut();
        assert!(audit.front().is_none());
        assert_eq!(audit.shed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn undelivered_batches_are_adopted_by_the_next_edge_with_their_ids_and_the_file_empties() {
        let dir = tempfile::tempdir().unwrap();
        let first = spilling(dir.path(), 100);
        for tool in ["a", "b"] {
            first.record(record(tool));
        }
        first.cut();
        first.record(record("c"));
        first.cut();
        let ids: Vec<String> = lock(&first.queue)
            .batches
            .iter()
            .map(|b| b.batch_id.clone())
            .collect();
        // While the first edge lives, its file is locked: a second edge adopts nothing.
        let second = spilling(dir.path(), 100);
        assert!(second.front().is_none());
        drop(second);
        // Gone (as after kill -9): the next edge adopts both batches, same ids, in order.
        drop(first);
        let third = spilling(dir.path(), 100);
        let adopted: Vec<String> = lock(&third.queue)
            .batches
            .iter()
            .map(|b| b.batch_id.clone())
            .collect();
        assert_eq!(adopted, ids);
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .collect();
        assert_eq!(files.len(), 1, "the adopted files are deleted: {files:?}");
        // Acknowledged: the file empties.
        for id in &ids {
            third.delivered(id);
        }
        let path = third.spill_path().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn a_torn_last_batch_is_skipped_and_the_whole_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = spilling(dir.path(), 100);
        first.record(record("a"));
        first.cut();
        let path = first.spill_path().unwrap();
        drop(first);
        // A second batch cut short, as by kill -9 in the middle of a write.
        let torn = pb::ReportUsageRequest {
            records: vec![record("b")],
            batch_id: "x".into(),
            ..Default::default()
        }
        .encode_length_delimited_to_vec();
        let mut file = File::options().append(true).open(&path).unwrap();
        file.write_all(&torn[..torn.len() - 3]).unwrap();
        drop(file);
        let next = spilling(dir.path(), 100);
        let batches = &lock(&next.queue).batches;
        assert_eq!(batches.len(), 1);
        assert_eq!(tools(&batches[0]), ["a"]);
    }

    #[test]
    fn a_full_spill_file_keeps_batches_in_memory_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::open(AuditSettings {
            enabled: true,
            capacity: 100,
            spill_dir: Some(dir.path().to_owned()),
            spill_max_bytes: 10,
            edge: "e1".into(),
        })
        .unwrap();
        audit.record(record("a"));
        audit.cut();
        assert_eq!(audit.front().map(|b| b.records.len()), Some(1));
        assert!(lock(audit.spill.as_ref().unwrap()).overflowed);
    }
}
