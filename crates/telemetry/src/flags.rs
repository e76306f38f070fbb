//! Command-line flags every Toolplane service takes for its logs.

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
