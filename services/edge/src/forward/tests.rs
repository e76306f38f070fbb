use super::*;

fn settings() -> BreakerSettings {
    BreakerSettings {
        failures: 3,
        cooldown: Duration::from_secs(60),
        shared_tenants: 3,
        connect_timeout: Duration::from_secs(1),
        tenant_share_percent: 50,
        tool_share_percent: 100,
        credential_env_prefix: "TOOLPLANE_CRED_".into(),
        key: ExecutorKey::generate(),
        upstream_http: reqwest::Client::default(),
    }
}

#[test]
fn one_tenant_cannot_open_the_shared_breaker() {
    let settings = settings();
    let mut breakers = Breakers::new();
    for _ in 0..100 {
        breakers.failed("mallory", &settings);
    }
    assert!(!breakers.admit("mallory"), "its own breaker is open");
    assert!(breakers.admit("alice"), "everyone else is still served");
    assert!(matches!(breakers.shared, BreakerState::Closed { .. }));
}

#[test]
fn two_tenants_cannot_open_it_either_a_widely_failing_executor_does() {
    let settings = settings();
    let mut breakers = Breakers::new();
    // T1 fails six times, T2 once: T3's call still goes through (the issue-29 attack).
    for _ in 0..6 {
        breakers.failed("t1", &settings);
    }
    breakers.failed("t2", &settings);
    assert!(breakers.admit("t3"));
    // An attacker holding two tenants opens both of their own breakers, not the shared one.
    for _ in 0..3 {
        breakers.failed("t2", &settings);
    }
    assert!(!breakers.admit("t2"));
    assert!(breakers.admit("t3"));
    assert!(matches!(breakers.shared, BreakerState::Closed { .. }));
    // Three tenants failing, and they are most of the recent callers: open for everyone.
    let mut broken = Breakers::new();
    broken.succeeded("dave");
    for tenant in ["alice", "bob"] {
        for _ in 0..3 {
            assert!(!broken.failed(tenant, &settings));
        }
    }
    broken.failed("carol", &settings);
    broken.failed("carol", &settings);
    assert!(
        broken.failed("carol", &settings),
        "three tenants failing: open"
    );
    assert!(!broken.admit("dave"));
    // Three failing tenants among many that succeed: not broken for everyone.
    let mut partial = Breakers::new();
    for tenant in ["a", "b", "c", "d", "e", "f", "g"] {
        partial.succeeded(tenant);
    }
    for tenant in ["x", "y", "z"] {
        for _ in 0..3 {
            partial.failed(tenant, &settings);
        }
    }
    assert!(partial.admit("a"), "3 failing of 10 recent callers");
}

#[test]
fn input_errors_never_count_and_callers_never_see_internals() {
    for code in [
        Code::InvalidArgument,
        Code::PermissionDenied,
        Code::NotFound,
    ] {
        let error = ForwardError::Failed {
            tool: "t".into(),
            executor: "wiki".into(),
            code,
            message: "bad action".into(),
        };
        assert!(!error.counts_against_executor());
        assert_eq!(error.caller_message("r1"), "t refused the call: bad action");
    }
    let internal = ForwardError::Failed {
        tool: "t".into(),
        executor: "wiki".into(),
        code: Code::Internal,
        message: "failed to decode Protobuf message: recursion limit reached".into(),
    };
    assert!(internal.counts_against_executor());
    let unreachable = ForwardError::Unreachable {
        tool: "t".into(),
        executor: "wiki".into(),
        message: "transport error: tcp connect error: 10.0.0.5:50052".into(),
    };
    for error in [internal, unreachable] {
        let shown = error.caller_message("r1");
        assert!(
            !shown.contains("wiki")
                && !shown.contains("10.0.0.5")
                && !shown.contains("Protobuf")
                && !shown.contains("transport"),
            "{shown}"
        );
        assert!(shown.contains("r1"));
    }
}

#[test]
fn shares_are_at_least_one_and_at_most_the_whole() {
    assert_eq!(share(64, 50), 32);
    assert_eq!(share(1, 50), 1);
    assert_eq!(share(3, 50), 2);
    assert_eq!(share(16, 100), 16);
    assert_eq!(share(0, 100), 1);
}

#[test]
fn audit_codes_are_short_snake_case_and_never_carry_messages() {
    let failed = |code| ForwardError::Failed {
        tool: "t".into(),
        executor: "wiki".into(),
        code,
        message: "secret detail".into(),
    };
    assert_eq!(
        failed(Code::InvalidArgument).audit_code(),
        "executor_invalid_argument"
    );
    assert_eq!(failed(Code::Internal).audit_code(), "executor_internal");
    assert_eq!(
        failed(Code::DeadlineExceeded).audit_code(),
        "executor_deadline_exceeded"
    );
    let timeout = ForwardError::Timeout {
        tool: "t".into(),
        timeout_ms: 5,
    };
    assert_eq!(timeout.audit_code(), "timeout");
    let unreachable = ForwardError::Unreachable {
        tool: "t".into(),
        executor: "wiki".into(),
        message: "10.0.0.5:50052".into(),
    };
    assert_eq!(unreachable.audit_code(), "unreachable");
}

#[test]
fn forward_errors_have_one_class_each() {
    use tp_registry::{ErrorCode, HasErrorCode as _};
    let failed = |code| ForwardError::Failed {
        tool: "t".into(),
        executor: "e".into(),
        code,
        message: String::new(),
    };
    assert_eq!(
        failed(Code::InvalidArgument).code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        failed(Code::PermissionDenied).code(),
        ErrorCode::PermissionDenied
    );
    assert_eq!(failed(Code::Internal).code(), ErrorCode::Internal);
    assert_eq!(
        ForwardError::Timeout {
            tool: "t".into(),
            timeout_ms: 1
        }
        .code(),
        ErrorCode::Timeout
    );
    assert_eq!(
        ForwardError::BreakerOpen { tool: "t".into() }.code(),
        ErrorCode::Unavailable
    );
}
