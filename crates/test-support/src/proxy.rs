//! A TCP proxy on loopback that can go silent: while stalled it forwards nothing in either
//! direction, but keeps every connection open, as a black-holed network path does. A peer
//! sees silence, not a closed socket, so only a heartbeat or a timeout can tell it apart from
//! a slow answer. It can also silence only the replies ([`StallProxy::stall_replies`]): requests
//! reach the server, answers never come back — a lost acknowledgement.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The proxy; stops when dropped.
#[derive(Debug)]
pub struct StallProxy {
    /// `127.0.0.1:port` to connect to instead of the upstream.
    pub addr: String,
    stalled: Arc<AtomicBool>,
    /// Like `stalled`, for the upstream → client direction only.
    replies_stalled: Arc<AtomicBool>,
    /// Bumped by [`StallProxy::resume`]: connections from before it are closed then.
    generation: Arc<AtomicU64>,
    /// Reads from the clients' side: at least one per round trip a client waited for.
    requests_read: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

// === impl StallProxy ===

impl StallProxy {
    /// Starts forwarding to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> StallProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        let stalled = Arc::new(AtomicBool::new(false));
        let replies_stalled = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let requests_read = Arc::new(AtomicU64::new(0));
        let upstream = upstream.to_owned();
        let task = {
            let (stalled, generation) = (Arc::clone(&stalled), Arc::clone(&generation));
            let replies_stalled = Arc::clone(&replies_stalled);
            let requests_read = Arc::clone(&requests_read);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    let born = generation.load(Ordering::SeqCst);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    for (mut from, mut to, also_stalled, reads) in [
                        (
                            Box::new(client_read) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                            Box::new(server_write) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
                            None,
                            Some(Arc::clone(&requests_read)),
                        ),
                        (
                            Box::new(server_read),
                            Box::new(client_write),
                            Some(Arc::clone(&replies_stalled)),
                            None,
                        ),
                    ] {
                        let (stalled, generation) = (Arc::clone(&stalled), Arc::clone(&generation));
                        tokio::spawn(async move {
                            let mut buffer = vec![0u8; 16 * 1024];
                            loop {
                                let read = tokio::select! {
                                    read = from.read(&mut buffer) => read,
                                    () = Self::closed(&generation, born) => return,
                                };
                                let Ok(n @ 1..) = read else { return };
                                if let Some(reads) = &reads {
                                    reads.fetch_add(1, Ordering::Relaxed);
                                }
                                while stalled.load(Ordering::SeqCst)
                                    || also_stalled
                                        .as_ref()
                                        .is_some_and(|s| s.load(Ordering::SeqCst))
                                {
                                    if generation.load(Ordering::SeqCst) != born {
                                        return;
                                    }
                                    tokio::time::sleep(Duration::from_millis(10)).await;
                                }
                                if generation.load(Ordering::SeqCst) != born
                                    || to.write_all(&buffer[..n]).await.is_err()
                                {
                                    return;
                                }
                            }
                        });
                    }
                }
            })
        };
        StallProxy {
            addr,
            stalled,
            replies_stalled,
            generation,
            requests_read,
            task,
        }
    }

    /// How many reads the proxy has made from its clients' side, on every connection so far.
    /// A client that waits for each answer before it sends the next request costs at least
    /// one read per request; pipelined requests share reads.
    pub fn requests_read(&self) -> u64 {
        self.requests_read.load(Ordering::Relaxed)
    }

    /// Resolves once connections born in `born` are to be closed.
    async fn closed(generation: &AtomicU64, born: u64) {
        while generation.load(Ordering::SeqCst) == born {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops forwarding; connections stay open and silent.
    pub fn stall(&self) {
        self.stalled.store(true, Ordering::SeqCst);
    }

    /// Forwards requests but no replies; connections stay open.
    pub fn stall_replies(&self) {
        self.replies_stalled.store(true, Ordering::SeqCst);
    }

    /// Forwards again: connections opened from now on work; the ones that were silenced are
    /// closed (their peers have given up on them, or will see the close).
    pub fn resume(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.stalled.store(false, Ordering::SeqCst);
        self.replies_stalled.store(false, Ordering::SeqCst);
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}
