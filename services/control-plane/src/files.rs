//! Files only their owner may read: tokens and keys.

use std::path::Path;

/// Writes a file readable by its owner only.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// Logs a warning when `path` (holding `what`) may be read by users other than its owner;
/// Kubernetes mounts secrets 0644 unless told otherwise (`defaultMode: 0400`).
pub fn warn_if_shared(path: &Path, what: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", meta.permissions().mode() & 0o777),
                "{what} may be read by other users: chmod 600 it (or mount it with defaultMode 0400)"
            );
        }
    }
}
