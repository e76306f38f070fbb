//! Why an OAuth callback did not connect, and the HTTP status that says so.

/// Why a callback did not connect.
#[derive(Debug)]
pub struct CallbackError {
    /// Whose fault.
    pub kind: CallbackFault,
    /// For the person at the browser.
    pub message: String,
}

/// Whose fault a failed callback is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackFault {
    /// The request: no code, a bad or expired state (400).
    Request,
    /// The provider: it refused or could not be reached (502).
    Provider,
    /// The control plane's store (503).
    Store,
}

impl CallbackError {
    pub(super) fn bad(message: impl Into<String>) -> Self {
        Self {
            kind: CallbackFault::Request,
            message: message.into(),
        }
    }

    pub(super) fn provider(message: impl Into<String>) -> Self {
        Self {
            kind: CallbackFault::Provider,
            message: message.into(),
        }
    }

    pub(super) fn store(message: impl Into<String>) -> Self {
        Self {
            kind: CallbackFault::Store,
            message: message.into(),
        }
    }

    /// The HTTP status of the page that tells it.
    pub fn status(&self) -> http::StatusCode {
        match self.kind {
            CallbackFault::Request => http::StatusCode::BAD_REQUEST,
            CallbackFault::Provider => http::StatusCode::BAD_GATEWAY,
            CallbackFault::Store => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}
