//! Relays an executor's progress and log events to the client while a call runs.

use super::*;
use rmcp::model::ServerNotification;

/// Relays an executor's progress and log events to the client while a call runs: a task
/// started at the first event, fed through a channel.
pub(super) struct Relay {
    sink: Sink,
    progress_token: Option<rmcp::model::ProgressToken>,
    min_log: Option<u8>,
    sender: Option<tokio::sync::mpsc::UnboundedSender<CallEvent>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Relay {
    pub(super) fn new(ctx: &CallContext<'_>) -> Relay {
        // 2026-07-28 requests carry their own log level; without one the client asked for no
        // log messages. Earlier versions set a level per session, which a stateless edge does
        // not keep, so every message of the call is relayed.
        let min_log = if super::declares_version(ctx.meta) {
            ctx.meta.log_level().map(log_rank)
        } else {
            Some(0)
        };
        Relay {
            sink: ctx.sink.clone(),
            progress_token: ctx.meta.get_progress_token(),
            min_log,
            sender: None,
            task: None,
        }
    }

    pub(super) fn send(&mut self, event: CallEvent) {
        if self.sender.is_none() {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            self.task = Some(tokio::spawn(relay(
                receiver,
                self.sink.clone(),
                self.progress_token.clone(),
                self.min_log,
            )));
            self.sender = Some(sender);
        }
        if let Some(sender) = &self.sender {
            let _ = sender.send(event);
        }
    }

    /// Waits until every event sent so far has gone out.
    pub(super) async fn finish(&mut self) {
        self.sender = None;
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn relay(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<CallEvent>,
    sink: Sink,
    progress_token: Option<rmcp::model::ProgressToken>,
    min_log: Option<u8>,
) {
    while let Some(event) = receiver.recv().await {
        match event {
            CallEvent::Progress(progress) => {
                let Some(token) = progress_token.clone() else {
                    continue;
                };
                let mut param = ProgressNotificationParam::new(token, progress.progress);
                if progress.total > 0.0 {
                    param = param.with_total(progress.total);
                }
                if !progress.message.is_empty() {
                    param = param.with_message(progress.message);
                }
                sink.notify(ServerNotification::ProgressNotification(
                    rmcp::model::ProgressNotification::new(param),
                ))
                .await;
            }
            CallEvent::Log(log) => {
                let level = match pb::LogLevel::try_from(log.level) {
                    Ok(pb::LogLevel::Debug) => LoggingLevel::Debug,
                    Ok(pb::LogLevel::Warning) => LoggingLevel::Warning,
                    Ok(pb::LogLevel::Error) => LoggingLevel::Error,
                    Ok(pb::LogLevel::Info | pb::LogLevel::Unspecified) | Err(_) => {
                        LoggingLevel::Info
                    }
                };
                if min_log.is_none_or(|min| log_rank(level) < min) {
                    continue;
                }
                let param = LoggingMessageNotificationParam::new(level, Value::String(log.message));
                sink.notify(ServerNotification::LoggingMessageNotification(
                    rmcp::model::LoggingMessageNotification::new(param),
                ))
                .await;
            }
        }
    }
}

/// Severity order of MCP log levels (RFC 5424, least severe first).
fn log_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
