//! Every error a Toolplane process answers an MCP client with, in one table: its class
//! ([`ErrorCode`], which gives the gRPC code wherever the error crosses gRPC), the HTTP status
//! it is sent with, and its JSON-RPC code where MCP carries one. The edge builds every error
//! response from a [`Fault`], so a status, a code and a meaning cannot be paired differently in
//! two places; `docs/errors.md` is this table, and a test keeps the two equal.

use tp_registry::ErrorCode;

/// JSON-RPC error codes, one meaning each: the five JSON-RPC 2.0 defines, the ones MCP
/// defines, and Toolplane's own (in the range JSON-RPC leaves to servers).
pub mod jsonrpc {
    /// The body is not JSON.
    pub const PARSE_ERROR: i32 = -32700;
    /// JSON that is not one JSON-RPC 2.0 request or notification.
    pub const INVALID_REQUEST: i32 = -32600;
    /// A method the server does not serve.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// Parameters of the wrong shape, or naming a tool the caller does not have.
    pub const INVALID_PARAMS: i32 = -32602;
    /// A failure of the server itself.
    pub const INTERNAL_ERROR: i32 = -32603;
    /// The `Mcp-Session-Id` names no live session of this caller (the code MCP's SDKs use).
    pub const SESSION_NOT_FOUND: i32 = -32001;
    /// A resource that does not exist (MCP).
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
    /// A 2026-07-28 request whose `Mcp-*` headers disagree with its body (MCP, SEP-2243).
    pub const HEADER_MISMATCH: i32 = -32020;
    /// The request does not declare a client capability the tool needs (MCP).
    pub const MISSING_CLIENT_CAPABILITY: i32 = -32021;
    /// A 2026-07-28 request names, in `_meta`, a protocol version the server does not speak
    /// (MCP; `data.supported` lists those it does).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
    /// Toolplane: the tenant's rate limit of tool calls per minute.
    pub const RATE_LIMITED: i32 = -32029;
    /// Toolplane: the caller's tool registry could not be loaded (control plane unreachable
    /// and nothing cached).
    pub const REGISTRY_UNAVAILABLE: i32 = -32030;
}

/// One row of the table: an error the edge answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The body is not JSON (or not UTF-8, or nested past the parser's limit).
    ParseError,
    /// Not one JSON-RPC 2.0 message (a scalar, a batch, a bad id), or a caller whose tenant
    /// no longer exists.
    InvalidRequest,
    /// A method the edge does not serve.
    MethodNotFound,
    /// Parameters or arguments of the wrong shape or beyond a limit, a bad cursor, or a tool
    /// the caller does not have (unknown, hidden and forbidden alike).
    InvalidParams,
    /// A resource (the edge serves none).
    ResourceNotFound,
    /// A session id that does not open: expired, or another caller's.
    SessionNotFound,
    /// 2026-07-28 `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers that disagree with the body.
    HeaderMismatch,
    /// A tool needing a client capability the request does not declare.
    MissingClientCapability,
    /// A protocol version in a request's `_meta` that the edge does not speak.
    UnsupportedProtocolVersion,
    /// The tenant's rate limit.
    RateLimited,
    /// The registry cannot be loaded: the control plane is unreachable and nothing is cached.
    RegistryUnavailable,
    /// A failure of the edge itself.
    Internal,
    /// No credential, or one that is unknown, revoked, expired or for another resource.
    Unauthenticated,
    /// Headers that contradict themselves (two `Authorization` or `Host` headers, say): which
    /// one a proxy and the edge each read cannot be known, so neither is.
    BadHeaders,
    /// A browser `Origin` or a `Host` the edge does not serve.
    ForbiddenOrigin,
    /// Nothing at this path.
    NotFound,
    /// `/mcp` with an HTTP method other than POST (and not a 2025-xx session's GET stream).
    MethodNotAllowed,
    /// An `Accept` that does not take both `application/json` and `text/event-stream`.
    NotAcceptable,
    /// A POST body whose `Content-Type` is not `application/json`.
    UnsupportedMediaType,
    /// An `MCP-Protocol-Version` header that is repeated, not text, or names a version the
    /// edge does not speak.
    BadVersionHeader,
    /// The body did not arrive within `http.body_read_timeout_ms`.
    BodyTimedOut,
    /// A body larger than `mcp.max_body_bytes`.
    BodyTooLarge,
    /// The caller's key or tenant holds as many long-lived streams as it may.
    TooManyStreams,
    /// The edge is at `mcp.max_in_flight` requests or its in-flight byte budget: retry.
    Overloaded,
    /// Something the answer needs is not available right now — a credential cannot be
    /// checked (the control plane or the token issuer does not answer): retry.
    Unavailable,
    /// The request took longer than `mcp.request_timeout_ms`.
    TimedOut,
}

impl Fault {
    /// Every row, in the order of `docs/errors.md`.
    pub const ALL: [Fault; 26] = [
        Fault::ParseError,
        Fault::InvalidRequest,
        Fault::MethodNotFound,
        Fault::InvalidParams,
        Fault::ResourceNotFound,
        Fault::SessionNotFound,
        Fault::HeaderMismatch,
        Fault::MissingClientCapability,
        Fault::UnsupportedProtocolVersion,
        Fault::RateLimited,
        Fault::RegistryUnavailable,
        Fault::Internal,
        Fault::Unauthenticated,
        Fault::BadHeaders,
        Fault::ForbiddenOrigin,
        Fault::NotFound,
        Fault::MethodNotAllowed,
        Fault::NotAcceptable,
        Fault::UnsupportedMediaType,
        Fault::BadVersionHeader,
        Fault::BodyTimedOut,
        Fault::BodyTooLarge,
        Fault::TooManyStreams,
        Fault::Overloaded,
        Fault::Unavailable,
        Fault::TimedOut,
    ];

    /// The row's name in `docs/errors.md`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::ParseError => "parse error",
            Fault::InvalidRequest => "invalid request",
            Fault::MethodNotFound => "method not found",
            Fault::InvalidParams => "invalid params",
            Fault::ResourceNotFound => "resource not found",
            Fault::SessionNotFound => "session not found",
            Fault::HeaderMismatch => "header mismatch",
            Fault::MissingClientCapability => "missing client capability",
            Fault::UnsupportedProtocolVersion => "unsupported protocol version",
            Fault::RateLimited => "rate limited",
            Fault::RegistryUnavailable => "registry unavailable",
            Fault::Internal => "internal error",
            Fault::Unauthenticated => "unauthenticated",
            Fault::BadHeaders => "bad headers",
            Fault::ForbiddenOrigin => "forbidden origin or host",
            Fault::NotFound => "not found",
            Fault::MethodNotAllowed => "method not allowed",
            Fault::NotAcceptable => "not acceptable",
            Fault::UnsupportedMediaType => "unsupported media type",
            Fault::BadVersionHeader => "bad protocol version header",
            Fault::BodyTimedOut => "body timed out",
            Fault::BodyTooLarge => "body too large",
            Fault::TooManyStreams => "too many streams",
            Fault::Overloaded => "overloaded",
            Fault::Unavailable => "unavailable",
            Fault::TimedOut => "timed out",
        }
    }

    /// The class, which is what the error is called across gRPC.
    pub fn class(self) -> ErrorCode {
        match self {
            Fault::ParseError
            | Fault::InvalidRequest
            | Fault::InvalidParams
            | Fault::HeaderMismatch
            | Fault::UnsupportedProtocolVersion
            | Fault::BadHeaders
            | Fault::MethodNotAllowed
            | Fault::NotAcceptable
            | Fault::UnsupportedMediaType
            | Fault::BadVersionHeader
            | Fault::BodyTooLarge => ErrorCode::InvalidArgument,
            Fault::MethodNotFound
            | Fault::ResourceNotFound
            | Fault::SessionNotFound
            | Fault::NotFound => ErrorCode::NotFound,
            Fault::MissingClientCapability => ErrorCode::FailedPrecondition,
            Fault::RateLimited | Fault::TooManyStreams => ErrorCode::ResourceExhausted,
            Fault::RegistryUnavailable | Fault::Overloaded | Fault::Unavailable => {
                ErrorCode::Unavailable
            }
            Fault::Internal => ErrorCode::Internal,
            Fault::Unauthenticated => ErrorCode::Unauthenticated,
            Fault::ForbiddenOrigin => ErrorCode::PermissionDenied,
            Fault::BodyTimedOut | Fault::TimedOut => ErrorCode::Timeout,
        }
    }

    /// The JSON-RPC code, for the errors MCP carries in a JSON-RPC answer; `None` for those
    /// answered at the HTTP level (the body is then `{"error": "..."}`).
    pub fn jsonrpc(self) -> Option<i32> {
        match self {
            Fault::ParseError => Some(jsonrpc::PARSE_ERROR),
            Fault::InvalidRequest => Some(jsonrpc::INVALID_REQUEST),
            Fault::MethodNotFound => Some(jsonrpc::METHOD_NOT_FOUND),
            Fault::InvalidParams => Some(jsonrpc::INVALID_PARAMS),
            Fault::ResourceNotFound => Some(jsonrpc::RESOURCE_NOT_FOUND),
            Fault::SessionNotFound => Some(jsonrpc::SESSION_NOT_FOUND),
            Fault::HeaderMismatch => Some(jsonrpc::HEADER_MISMATCH),
            Fault::MissingClientCapability => Some(jsonrpc::MISSING_CLIENT_CAPABILITY),
            Fault::UnsupportedProtocolVersion => Some(jsonrpc::UNSUPPORTED_PROTOCOL_VERSION),
            Fault::RateLimited => Some(jsonrpc::RATE_LIMITED),
            Fault::RegistryUnavailable => Some(jsonrpc::REGISTRY_UNAVAILABLE),
            Fault::Internal => Some(jsonrpc::INTERNAL_ERROR),
            Fault::Unauthenticated
            | Fault::BadHeaders
            | Fault::ForbiddenOrigin
            | Fault::NotFound
            | Fault::MethodNotAllowed
            | Fault::NotAcceptable
            | Fault::UnsupportedMediaType
            | Fault::BadVersionHeader
            | Fault::BodyTimedOut
            | Fault::BodyTooLarge
            | Fault::TooManyStreams
            | Fault::Overloaded
            | Fault::Unavailable
            | Fault::TimedOut => None,
        }
    }

    /// The HTTP status it is sent with. A JSON-RPC error that answers a request with an id
    /// is a JSON-RPC answer (200) unless the transport must refuse the HTTP request itself;
    /// one that cannot name the request it answers (`id: null`) is 400, or 500 for the
    /// edge's own failure.
    pub fn http_status(self, answers_an_id: bool) -> u16 {
        match self {
            Fault::ParseError | Fault::InvalidRequest => 400,
            Fault::MethodNotFound
            | Fault::InvalidParams
            | Fault::ResourceNotFound
            | Fault::RateLimited
            | Fault::RegistryUnavailable => {
                if answers_an_id {
                    200
                } else {
                    400
                }
            }
            Fault::Internal => {
                if answers_an_id {
                    200
                } else {
                    500
                }
            }
            Fault::HeaderMismatch
            | Fault::MissingClientCapability
            | Fault::UnsupportedProtocolVersion => 400,
            Fault::SessionNotFound | Fault::NotFound => 404,
            Fault::Unauthenticated => 401,
            Fault::BadHeaders | Fault::BadVersionHeader => 400,
            Fault::MethodNotAllowed => 405,
            Fault::NotAcceptable => 406,
            Fault::UnsupportedMediaType => 415,
            Fault::ForbiddenOrigin => 403,
            Fault::BodyTimedOut => 408,
            Fault::BodyTooLarge => 413,
            Fault::TooManyStreams => 429,
            Fault::Overloaded | Fault::Unavailable => 503,
            Fault::TimedOut => 504,
        }
    }

    /// The HTTP status of a JSON-RPC error answering a 2026-07-28 request with an id: as
    /// [`Fault::http_status`], except that a method the edge does not serve is 404 (that
    /// version's HTTP binding: an intermediary routes on the status without reading the body).
    /// Before 2026-07-28 an error a method answers with travels in a JSON-RPC answer (200).
    pub fn http_status_at_2026_07_28(self) -> u16 {
        match self {
            Fault::MethodNotFound => 404,
            other => other.http_status(true),
        }
    }

    /// Whether the answer's body is one line of plain text, as MCP's SDKs answer the four
    /// refusals the transport makes before it reads a message; the other HTTP-level faults
    /// answer `{"error": "<sentence>"}`.
    pub fn plain_text(self) -> bool {
        matches!(
            self,
            Fault::MethodNotAllowed
                | Fault::NotAcceptable
                | Fault::UnsupportedMediaType
                | Fault::BadVersionHeader
        )
    }

    /// The row a JSON-RPC code stands for, if it is one of the table's.
    pub fn from_jsonrpc(code: i32) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.jsonrpc() == Some(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jsonrpc_code_has_one_meaning() {
        let codes: Vec<i32> = Fault::ALL.iter().filter_map(|f| f.jsonrpc()).collect();
        let mut unique = codes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(codes.len(), unique.len(), "{codes:?}");
        for fault in Fault::ALL {
            if let Some(code) = fault.jsonrpc() {
                assert_eq!(Fault::from_jsonrpc(code), Some(fault));
                // JSON-RPC reserves -32768..-32000 for the protocol and servers.
                assert!((-32768..=-32000).contains(&code), "{code}");
            }
        }
        let names: std::collections::HashSet<_> = Fault::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), Fault::ALL.len());
    }

    #[test]
    fn http_level_faults_are_never_200_and_errors_without_an_id_are_400() {
        for fault in Fault::ALL {
            assert_ne!(fault.http_status(false), 200, "{fault:?}");
            if fault.jsonrpc().is_none() {
                assert!(fault.http_status(true) >= 400, "{fault:?}");
                assert_eq!(fault.http_status(true), fault.http_status(false));
            }
        }
    }
}
