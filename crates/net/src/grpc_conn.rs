//! A gRPC connection (plain or TLS) closed after `idle_timeout_ms` without a request or a
//! response moving on it. Idleness is judged on HTTP/2 frames, read above TLS: only HEADERS,
//! CONTINUATION and DATA frames (requests, responses, stream messages such as the watch's
//! heartbeats) are activity. PING, SETTINGS, WINDOW_UPDATE, PRIORITY and the rest are not, so a
//! client cannot hold a slot of the connection cap with keep-alive pings alone.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::Guarded;
use crate::io::poll_deadline;

/// The client connection preface (RFC 9113 §3.4), before the client's first frame.
const PREFACE_LEN: usize = 24;

/// Finds frame boundaries in one direction of an HTTP/2 connection.
#[derive(Debug, Clone)]
pub(crate) struct FrameScan {
    skip: usize,
    header: [u8; 9],
    header_len: usize,
}

impl FrameScan {
    /// The scan of what a client sends (it starts with the preface).
    pub(crate) fn inbound() -> FrameScan {
        FrameScan {
            skip: PREFACE_LEN,
            header: [0; 9],
            header_len: 0,
        }
    }

    /// The scan of what a server sends (frames from the first byte).
    pub(crate) fn outbound() -> FrameScan {
        FrameScan {
            skip: 0,
            ..FrameScan::inbound()
        }
    }

    /// Reads `bytes`, the next bytes of the direction; whether a frame that counts as activity
    /// began among them.
    pub(crate) fn scan(&mut self, mut bytes: &[u8]) -> bool {
        let mut active = false;
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
            self.header_len += n;
            bytes = &bytes[n..];
            if self.header_len == 9 {
                let length = usize::from(self.header[0]) << 16
                    | usize::from(self.header[1]) << 8
                    | usize::from(self.header[2]);
                // DATA, HEADERS, CONTINUATION.
                active |= matches!(self.header[3], 0x0 | 0x1 | 0x9);
                self.skip = length;
                self.header_len = 0;
            }
        }
        active
    }
}

/// A gRPC connection from [`crate::grpc_incoming_tls`]: plain or TLS, with the idle deadline.
#[derive(Debug)]
pub struct GrpcConn {
    io: Inner,
    idle: Option<Duration>,
    last_activity: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    inbound: FrameScan,
    outbound: FrameScan,
}

#[derive(Debug)]
enum Inner {
    Plain(Pin<Box<Guarded<TcpStream>>>),
    Tls(Pin<Box<tokio_rustls::server::TlsStream<Guarded<TcpStream>>>>),
}

impl GrpcConn {
    /// A plain connection.
    pub(crate) fn plain(io: Guarded<TcpStream>, idle: Option<Duration>) -> GrpcConn {
        GrpcConn::new(Inner::Plain(Box::pin(io)), idle)
    }

    /// A TLS connection.
    pub(crate) fn tls(
        io: tokio_rustls::server::TlsStream<Guarded<TcpStream>>,
        idle: Option<Duration>,
    ) -> GrpcConn {
        GrpcConn::new(Inner::Tls(Box::pin(io)), idle)
    }

    fn new(io: Inner, idle: Option<Duration>) -> GrpcConn {
        GrpcConn {
            io,
            idle,
            last_activity: Instant::now(),
            timer: None,
            inbound: FrameScan::inbound(),
            outbound: FrameScan::outbound(),
        }
    }

    fn idle_expired(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        poll_deadline(cx, None, self.idle, self.last_activity, &mut self.timer)
    }
}

impl AsyncRead for GrpcConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = match &mut this.io {
            Inner::Plain(io) => io.as_mut().poll_read(cx, buf),
            Inner::Tls(io) => io.as_mut().poll_read(cx, buf),
        };
        match polled {
            Poll::Ready(Ok(())) => {
                if this.inbound.scan(&buf.filled()[before..]) {
                    this.last_activity = Instant::now();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            // Waiting for the client: the idle deadline runs.
            Poll::Pending => this.idle_expired(cx).map(Err),
        }
    }
}

impl AsyncWrite for GrpcConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = match &mut this.io {
            Inner::Plain(io) => io.as_mut().poll_write(cx, buf),
            Inner::Tls(io) => io.as_mut().poll_write(cx, buf),
        };
        if let Poll::Ready(Ok(n)) = polled
            && this.outbound.scan(&buf[..n])
        {
            this.last_activity = Instant::now();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            Inner::Plain(io) => io.as_mut().poll_flush(cx),
            Inner::Tls(io) => io.as_mut().poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            Inner::Plain(io) => io.as_mut().poll_shutdown(cx),
            Inner::Tls(io) => io.as_mut().poll_shutdown(cx),
        }
    }
}

impl tonic::transport::server::Connected for GrpcConn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        match &self.io {
            Inner::Plain(io) => io.connect_info(),
            Inner::Tls(io) => io.get_ref().0.connect_info(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut out = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            0,
            0,
            0,
            0,
            1,
        ];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn pings_and_settings_are_not_activity_requests_are() {
        let mut scan = FrameScan::inbound();
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, &[0; 6])); // SETTINGS
        assert!(!scan.scan(&bytes));
        let ping = frame(0x6, &[7; 8]);
        for _ in 0..100 {
            assert!(!scan.scan(&ping), "a PING is not activity");
        }
        assert!(!scan.scan(&frame(0x8, &[0, 0, 1, 0]))); // WINDOW_UPDATE
        // A HEADERS frame, delivered a byte at a time, is.
        let headers = frame(0x1, &[0x82, 0x86]);
        let seen: Vec<bool> = headers.iter().map(|b| scan.scan(&[*b])).collect();
        assert_eq!(seen.iter().filter(|s| **s).count(), 1);
        // A DATA frame whose payload looks like frame headers is one frame.
        let data = frame(0x0, &frame(0x1, &[0; 3]));
        assert!(scan.scan(&data));
        assert!(!scan.scan(&ping), "the scan is still at a frame boundary");
        let mut out = FrameScan::outbound();
        assert!(!out.scan(&frame(0x4, &[])));
        assert!(out.scan(&frame(0x0, b"hello")));
    }
}
