//! `up`, `export` and `import` live in the `toolplane` launcher binary, which links every
//! service; `toolplanectl` links none and hands these commands over to it, so that
//! `toolplanectl up` keeps working wherever both binaries are installed side by side.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

/// The launcher's name.
pub const LAUNCHER: &str = "toolplane";

/// The arguments of a handed-over command, passed through untouched (`--help` too).
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct Handover {
    /// Arguments of `toolplane <command>` (see `toolplane <command> --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<OsString>,
}

/// The launcher beside this executable, else the first on `PATH`.
fn launcher() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(LAUNCHER))
        .filter(|path| path.is_file());
    beside.or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(LAUNCHER))
            .find(|path| path.is_file())
    })
}

/// Runs `toolplane <command> <args>` in place of this process (same pid, same signals).
pub fn run(command: &str, handover: Handover) -> anyhow::Result<i32> {
    let Some(path) = launcher() else {
        anyhow::bail!(
            "`toolplanectl {command}` is run by the `{LAUNCHER}` launcher, which is neither beside \
             toolplanectl nor on PATH: build it with `cargo build --release --bin {LAUNCHER}` \
             (or run `cargo run --release --bin {LAUNCHER} -- {command}`)"
        );
    };
    let mut child = std::process::Command::new(&path);
    child.arg(command).args(&handover.args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let error = child.exec();
        Err(anyhow::anyhow!("starting {}: {error}", path.display()))
    }
    #[cfg(not(unix))]
    {
        let status = child
            .status()
            .map_err(|error| anyhow::anyhow!("starting {}: {error}", path.display()))?;
        Ok(status.code().unwrap_or(1))
    }
}
