//! A request body that must arrive in full by a deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error a [`TimedBody`] fails with when its deadline passes (HTTP 408).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive in time")]
pub struct BodyTimedOut;

/// Boxed body error.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project_lite::pin_project! {
    /// A body that fails with [`BodyTimedOut`] unless it has arrived in full by a deadline set
    /// when the request head arrived.
    pub struct TimedBody<B> {
        #[pin]
        inner: B,
        deadline: Instant,
        sleep: Option<Pin<Box<Sleep>>>,
    }
}

impl<B> std::fmt::Debug for TimedBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedBody")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<B> TimedBody<B> {
    /// `inner`, due within `timeout` from now.
    pub fn new(inner: B, timeout: Duration) -> TimedBody<B> {
        TimedBody {
            inner,
            deadline: Instant::now() + timeout,
            sleep: None,
        }
    }
}

/// Whether an error (of a body, or anything wrapping one) is a [`BodyTimedOut`].
pub fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        current = error.source();
    }
    false
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => {
                let deadline = *this.deadline;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        metrics::counter!("tp_net_body_timeouts_total").increment(1);
                        Poll::Ready(Some(Err(Box::new(BodyTimedOut))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_coming_times_out() {
        let (mut sender, body) = http_body_util::channel::Channel::<Bytes, BoxError>::new(4);
        sender.send_data(Bytes::from_static(b"{")).await.unwrap();
        let timed = TimedBody::new(body, Duration::from_secs(5));
        let error = timed.collect().await.unwrap_err();
        assert!(is_body_timeout(error.as_ref()), "{error}");
        drop(sender);
    }

    #[tokio::test]
    async fn a_complete_body_passes() {
        let timed = TimedBody::new(
            http_body_util::Full::new(Bytes::from_static(b"{}")),
            Duration::from_secs(5),
        );
        assert_eq!(timed.collect().await.unwrap().to_bytes(), "{}");
    }
}
