//! Named connection profiles: where a control plane is and how to reach it (address, the CA
//! to trust, the client certificate for mutual TLS, the admin token or where to read it), so
//! that a command against a TLS control plane needs `--profile prod` rather than five
//! environment variables.
//!
//! The file is `$TOOLPLANE_CONFIG`, else `$XDG_CONFIG_HOME/toolplane/config.toml`, else
//! `~/.config/toolplane/config.toml`:
//!
//! ```toml
//! default_profile = "prod"          # used when no --profile is given (optional)
//!
//! [profiles.prod]
//! addr = "https://cp.example.com:50051"
//! ca_file = "/etc/toolplane/ca.crt"
//! client_cert_file = "/home/me/.toolplane/me.crt"    # mutual TLS: both or neither
//! client_key_file = "/home/me/.toolplane/me.key"
//! token_file = "/home/me/.toolplane/prod-admin-token" # or token_env = "TP_PROD_TOKEN"
//! ```
//!
//! Flags and `TOOLPLANE_ADDR` / `TOOLPLANE_ADMIN_TOKEN` win over the profile field for field.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde::Deserialize;

/// `~/.config/toolplane/config.toml` (or `$TOOLPLANE_CONFIG`): named control planes and how to
/// authenticate to each.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilesFile {
    /// The profile used when none is named.
    #[serde(default)]
    pub default_profile: Option<String>,
    /// Profiles by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// One control plane and how to reach it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// `host:port` or a URL (`https://` for TLS).
    pub addr: Option<String>,
    /// PEM CA certificates to trust (the system's roots are not used).
    pub ca_file: Option<PathBuf>,
    /// The client certificate for mutual TLS (with `client_key_file`).
    pub client_cert_file: Option<PathBuf>,
    /// Its private key.
    pub client_key_file: Option<PathBuf>,
    /// The admin token itself (prefer `token_file` or `token_env`).
    pub token: Option<String>,
    /// A file holding the admin token.
    pub token_file: Option<PathBuf>,
    /// An environment variable holding the admin token.
    pub token_env: Option<String>,
}

/// Where the profiles file is.
pub fn path() -> Option<PathBuf> {
    if let Some(file) = std::env::var_os("TOOLPLANE_CONFIG").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(file));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("toolplane/config.toml"))
}

/// The profile to use: `name` (`--profile` / `TOOLPLANE_PROFILE`), else the file's default;
/// `None` when neither names one. A named profile that does not exist is an error that lists
/// those that do.
pub fn select(name: Option<&str>) -> anyhow::Result<Option<(String, Profile)>> {
    let Some(file) = path() else {
        return match name {
            Some(name) => {
                bail!("no profiles file for --profile {name}: set TOOLPLANE_CONFIG or HOME")
            }
            None => Ok(None),
        };
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return match name {
                Some(name) => bail!(
                    "--profile {name}: {} does not exist (write a [profiles.{name}] section there)",
                    file.display()
                ),
                None => Ok(None),
            };
        }
        Err(error) => return Err(error).with_context(|| format!("reading {}", file.display())),
    };
    let parsed: ProfilesFile =
        toml::from_str(&text).with_context(|| format!("reading {}", file.display()))?;
    let Some(name) = name.map(str::to_owned).or(parsed.default_profile.clone()) else {
        return Ok(None);
    };
    match parsed.profiles.get(&name) {
        Some(profile) => {
            if profile.client_cert_file.is_some() != profile.client_key_file.is_some() {
                bail!(
                    "profile {name} in {}: client_cert_file and client_key_file go together",
                    file.display()
                );
            }
            Ok(Some((name, profile.clone())))
        }
        None => bail!(
            "no profile {name:?} in {} (profiles: {})",
            file.display(),
            if parsed.profiles.is_empty() {
                "none".to_owned()
            } else {
                parsed
                    .profiles
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    }
}

/// The profile's TLS files as the dialer takes them (`None` when it names none: the
/// environment's `TOOLPLANE_TLS_*` apply).
pub fn tls_files(profile: &Profile) -> Option<tp_client::ClientTlsFiles> {
    (profile.ca_file.is_some() || profile.client_cert_file.is_some()).then(|| {
        tp_client::ClientTlsFiles {
            ca_file: profile.ca_file.clone(),
            cert_file: profile.client_cert_file.clone(),
            key_file: profile.client_key_file.clone(),
        }
    })
}

/// The profile's admin token, if it gives one.
pub fn token(name: &str, profile: &Profile) -> anyhow::Result<Option<String>> {
    if let Some(token) = &profile.token {
        return Ok(Some(token.clone()));
    }
    if let Some(var) = &profile.token_env {
        return std::env::var(var)
            .map(|t| Some(t.trim().to_owned()))
            .with_context(|| format!("profile {name}: token_env {var} is not set"));
    }
    if let Some(file) = &profile.token_file {
        return std::fs::read_to_string(file)
            .map(|t| Some(t.trim().to_owned()))
            .with_context(|| format!("profile {name}: reading token_file {}", file.display()));
    }
    Ok(None)
}
