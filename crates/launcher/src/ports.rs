//! Whether `up`'s listen addresses are free, and who holds one that is not: another
//! `toolplane up` (with its pid and data dir), another process of this user (pid and
//! command line, found through `/proc`), or something this user cannot see.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs as _};
use std::path::PathBuf;

/// Fails with a sentence when `addr` (given by `flag`) cannot be bound because it is in use.
pub(crate) fn check_free(flag: &str, addr: &str) -> anyhow::Result<()> {
    let Some(socket) = addr.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        anyhow::bail!("{flag} {addr}: not an address this machine can listen on (HOST:PORT)");
    };
    if socket.port() == 0 {
        return Ok(());
    }
    match TcpListener::bind(socket) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {
            anyhow::bail!("{}", held_message(flag, socket))
        }
        Err(error) => Err(anyhow::Error::new(error).context(format!("{flag} {addr}"))),
    }
}

fn held_message(flag: &str, socket: SocketAddr) -> String {
    let fix = format!(
        "stop it, or give this `up` other ports ({flag} 127.0.0.1:0 picks a free one; every \
         --*-listen flag takes HOST:PORT)"
    );
    match holder(socket.port()) {
        Some(Holder { pid, argv, cwd }) if is_up(&argv) => {
            let data_dir = argv
                .iter()
                .position(|a| a == "--data-dir")
                .and_then(|i| argv.get(i + 1))
                .map_or(".toolplane", String::as_str);
            let data_dir = match &cwd {
                Some(cwd) if !data_dir.starts_with('/') => cwd.join(data_dir),
                _ => PathBuf::from(data_dir),
            };
            format!(
                "{socket} ({flag}) is held by another `toolplane up` (pid {pid}, data dir {}); \
                 {fix}. To use the running one, see {}/credentials.json",
                data_dir.display(),
                data_dir.display()
            )
        }
        Some(Holder { pid, argv, .. }) => format!(
            "{socket} ({flag}) is held by pid {pid} ({}); {fix}",
            argv.join(" ")
        ),
        None => format!(
            "{socket} ({flag}) is in use by a process this user cannot see (`ss -ltnp` names \
             it); {fix}"
        ),
    }
}

fn is_up(argv: &[String]) -> bool {
    // `toolplane up`, or `toolplanectl up` before it handed over (same pid).
    argv.first().is_some_and(|a| {
        a.ends_with("/toolplane") || a == "toolplane" || a.ends_with("toolplanectl")
    }) && argv.iter().skip(1).any(|a| a == "up")
}

/// A process listening on a port.
#[derive(Debug)]
struct Holder {
    pid: u32,
    argv: Vec<String>,
    cwd: Option<PathBuf>,
}

/// The process of this user that listens on `port` (Linux `/proc`; `None` elsewhere).
fn holder(port: u16) -> Option<Holder> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let owns = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                inodes
                    .iter()
                    .any(|inode| target == format!("socket:[{inode}]"))
            })
        });
        if owns {
            let argv = std::fs::read(entry.path().join("cmdline"))
                .map(|bytes| {
                    bytes
                        .split(|b| *b == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect()
                })
                .unwrap_or_default();
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
            return Some(Holder { pid, argv, cwd });
        }
    }
    None
}

/// Socket inodes in LISTEN state on `port` (IPv4 and IPv6).
fn listening_inodes(port: u16) -> Vec<String> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let listening = *state == "0A";
            let on_port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port);
            if listening && on_port {
                inodes.push((*inode).to_owned());
            }
        }
    }
    inodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_this_process_holds_is_named_with_its_pid() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let error = check_free("--mcp-listen", &addr.to_string()).unwrap_err();
        let text = format!("{error:#}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())) && text.contains("--mcp-listen"),
            "{text}"
        );
        drop(listener);
        check_free("--mcp-listen", &addr.to_string()).unwrap();
        check_free("--mcp-listen", "127.0.0.1:0").unwrap();
        assert!(check_free("--mcp-listen", "not an address").is_err());
    }
}
