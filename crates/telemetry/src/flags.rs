//! The `[log]` section every Toolplane service's configuration has, and the command-line
//! flags that override it.

use serde::{Deserialize, Serialize};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (coloured only on a terminal).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`: the format and the filter. A format other than `text` or `json` is refused when
/// the file is read (figment names the key).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: LogFormat,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig::with_level("info")
    }
}

impl LogConfig {
    /// Text lines filtered by `level`.
    pub fn with_level(level: &str) -> LogConfig {
        LogConfig {
            format: LogFormat::Text,
            level: level.to_owned(),
        }
    }

    /// Installs the global subscriber as [`crate::init`] does, from this section.
    pub fn init(&self, service: &str) -> crate::Telemetry {
        crate::init(&self.level, self.format == LogFormat::Json, service)
    }
}

/// `[log]` keys given as flags: a layer over the file and the environment (the services merge
/// it into their configuration with figment, as a provider, under `log`).
#[derive(Debug, Default, clap::Args, serde::Serialize)]
pub struct LogFlags {
    /// Log format, `text` or `json` (`log.format`; overrides the file and environment).
    #[arg(long = "log-format", value_parser = ["text", "json"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

impl LogFlags {
    /// Whether no flag was given (then the layer sets nothing).
    pub fn is_empty(&self) -> bool {
        self.format.is_none()
    }
}
