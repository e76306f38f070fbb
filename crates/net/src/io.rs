//! A connection that holds a slot of the connection cap and enforces a first-byte and an idle
//! deadline.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

pin_project_lite::pin_project! {
    /// A connection with its slot of the listener's connection cap (released when it is
    /// dropped), failing reads and writes with `TimedOut` when no byte arrived within the
    /// first-byte deadline, or nothing moved either way for the idle timeout.
    pub struct Guarded<IO> {
        #[pin]
        io: IO,
        first_byte: Option<Instant>,
        idle: Option<Duration>,
        last_activity: Instant,
        timer: Option<Pin<Box<Sleep>>>,
        _permit: Option<OwnedSemaphorePermit>,
    }
}

impl<IO> std::fmt::Debug for Guarded<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("first_byte", &self.first_byte)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl<IO> Guarded<IO> {
    /// `io` holding `permit`; `first_byte` and `idle` deadlines when given.
    pub fn new(
        io: IO,
        permit: Option<OwnedSemaphorePermit>,
        first_byte: Option<Duration>,
        idle: Option<Duration>,
    ) -> Guarded<IO> {
        let now = Instant::now();
        Guarded {
            io,
            first_byte: first_byte.map(|d| now + d),
            idle,
            last_activity: now,
            timer: None,
            _permit: permit,
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }
}

/// The next deadline of a connection: the first byte while none came, else the idle one.
fn next_deadline(
    first_byte: Option<Instant>,
    idle: Option<Duration>,
    last_activity: Instant,
) -> Option<Instant> {
    match (first_byte, idle) {
        (Some(first), Some(idle)) => Some(first.min(last_activity + idle)),
        (Some(first), None) => Some(first),
        (None, Some(idle)) => Some(last_activity + idle),
        (None, None) => None,
    }
}

/// Polls the connection's deadline after its I/O returned `Pending`: `Ready(Err)` when it has
/// passed (the connection is then closed by its server), `Pending` otherwise (the timer will
/// wake the task).
pub(crate) fn poll_deadline(
    cx: &mut Context<'_>,
    first_byte: Option<Instant>,
    idle: Option<Duration>,
    last_activity: Instant,
    timer: &mut Option<Pin<Box<Sleep>>>,
) -> Poll<io::Error> {
    let Some(deadline) = next_deadline(first_byte, idle, last_activity) else {
        return Poll::Pending;
    };
    loop {
        let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        // Activity moved the deadline later: re-arm lazily instead of on every byte.
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
        match sleep.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(()) if Instant::now() >= deadline => {
                let what = if first_byte.is_some_and(|f| f <= deadline) {
                    metrics::counter!("tp_net_connections_timed_out_total", "reason" => "first_byte")
                        .increment(1);
                    "no request arrived in time"
                } else {
                    metrics::counter!("tp_net_connections_timed_out_total", "reason" => "idle")
                        .increment(1);
                    "the connection was idle too long"
                };
                return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, what));
            }
            Poll::Ready(()) => continue,
        }
    }
}

impl<IO: AsyncRead> AsyncRead for Guarded<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        match this.io.poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    *this.first_byte = None;
                    if this.idle.is_some() {
                        *this.last_activity = Instant::now();
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => poll_deadline(
                cx,
                *this.first_byte,
                *this.idle,
                *this.last_activity,
                this.timer,
            )
            .map(Err),
        }
    }
}

impl<IO: AsyncWrite> AsyncWrite for Guarded<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        match this.io.poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                if n > 0 && this.idle.is_some() {
                    *this.last_activity = Instant::now();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            // A peer that does not read what it is sent is as idle as one that sends nothing.
            Poll::Pending => {
                poll_deadline(cx, None, *this.idle, *this.last_activity, this.timer).map(Err)
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        match this.io.poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => {
                if n > 0 && this.idle.is_some() {
                    *this.last_activity = Instant::now();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                poll_deadline(cx, None, *this.idle, *this.last_activity, this.timer).map(Err)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Guarded<tokio::net::TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_times_out_before_its_first_byte() {
        let (client, server) = tokio::io::duplex(64);
        let mut guarded = Guarded::new(server, None, Some(Duration::from_secs(3)), None);
        let mut buf = [0u8; 8];
        let error = guarded.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn activity_keeps_an_idle_deadline_away() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut guarded = Guarded::new(server, None, None, Some(Duration::from_secs(10)));
        let mut buf = [0u8; 8];
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(6)).await;
            client.write_all(b"x").await.unwrap();
            assert_eq!(guarded.read(&mut buf).await.unwrap(), 1);
        }
        // 30 s have passed in all, never 10 without a byte; now nothing more comes.
        let error = guarded.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }
}
