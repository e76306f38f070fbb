use super::*;

fn base() -> Figment {
    Figment::from(Serialized::defaults(RawConfig::default())).merge(Serialized::default(
        "edge_token",
        "an-edge-token-long-enough",
    ))
}

#[test]
fn defaults_with_a_token_are_valid() {
    let config = load(base()).unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.mcp.paging.page_size, 100);
    assert!(config.redis.is_none() && config.anonymous.is_none());
}

#[test]
fn bad_values_name_their_key() {
    for (key, value, needle) in [
        ("listen", serde_json::json!("x"), "listen"),
        ("control_plane", serde_json::json!([]), "control_plane"),
        (
            "control_plane",
            serde_json::json!(["ftp://x"]),
            "control_plane",
        ),
        ("edge_token", serde_json::json!("short"), "edge_token"),
        ("redis_url", serde_json::json!("http://x"), "redis_url"),
        ("mcp.page_size", serde_json::json!(0), "mcp.page_size"),
        (
            "mcp.max_body_bytes",
            serde_json::json!(10),
            "mcp.max_body_bytes",
        ),
        (
            "mcp.allowed_hosts",
            serde_json::json!([]),
            "mcp.allowed_hosts",
        ),
        (
            "watch.dead_after_ms",
            serde_json::json!(10),
            "dead_after_ms",
        ),
        ("anonymous.tenant", serde_json::json!("t"), "anonymous"),
        ("log.format", serde_json::json!("xml"), "log.format"),
        (
            "cache.rate_limits_when_redis_down",
            serde_json::json!("open"),
            "cache.rate_limits_when_redis_down",
        ),
        ("typo", serde_json::json!(1), "typo"),
    ] {
        let err = load(base().merge(Serialized::default(key, value))).unwrap_err();
        assert!(format!("{err:#}").contains(needle), "{key}: {err:#}");
    }
}

#[test]
fn the_example_config_in_deploy_loads() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/edge.toml");
    let config = load(figment(Some(&path)).merge(Serialized::default(
        "edge_token",
        "an-edge-token-long-enough",
    )))
    .unwrap();
    let defaults = load(base()).unwrap();
    assert_eq!(config.listen, defaults.listen);
    assert_eq!(config.mcp.paging.page_size, defaults.mcp.paging.page_size);
    assert_eq!(config.cache.l1_ttl, defaults.cache.l1_ttl);
}

#[test]
fn redis_topologies_are_said_once_and_consistently() {
    let with = |pairs: &[(&str, serde_json::Value)]| {
        let mut figment = base();
        for (key, value) in pairs {
            figment = figment.merge(Serialized::default(key, value.clone()));
        }
        load(figment)
    };
    let sentinels = serde_json::json!("redis://127.0.0.1:26379,redis://127.0.0.1:26380");
    let config = with(&[
        ("redis_url", sentinels.clone()),
        ("cache.redis_sentinel_master", serde_json::json!("tp")),
    ])
    .unwrap();
    let redis = config.redis.expect("redis_url is set");
    assert_eq!(redis.sentinel_master, "tp");
    assert_eq!(
        redis.urls,
        ["redis://127.0.0.1:26379", "redis://127.0.0.1:26380"]
    );
    for (pairs, needle) in [
        (
            vec![("redis_url", sentinels.clone())],
            "cache.redis_sentinel_master",
        ),
        (
            vec![
                ("redis_url", sentinels.clone()),
                ("cache.redis_sentinel_master", serde_json::json!("tp")),
                ("cache.redis_cluster", serde_json::json!(true)),
            ],
            "a Redis Cluster has no sentinels",
        ),
        (
            vec![("cache.redis_sentinel_master", serde_json::json!("tp"))],
            "set redis_url to the sentinels",
        ),
        (
            vec![
                ("redis_url", serde_json::json!("rediss://127.0.0.1:26379")),
                ("cache.redis_sentinel_master", serde_json::json!("tp")),
            ],
            "sentinels over TLS",
        ),
    ] {
        let err = with(&pairs).unwrap_err();
        assert!(format!("{err:#}").contains(needle), "{pairs:?}: {err:#}");
    }
}

#[test]
fn sections_become_the_settings_the_edge_runs_with() {
    let with = |pairs: &[(&str, serde_json::Value)]| {
        let mut figment = base();
        for (key, value) in pairs {
            figment = figment.merge(Serialized::default(key, value.clone()));
        }
        load(figment).unwrap()
    };
    let defaults = with(&[]);
    // What depends on other keys is resolved once, here.
    assert_eq!(defaults.mcp.state_secret, "an-edge-token-long-enough");
    assert_eq!(
        defaults.mcp.max_streams_per_tenant,
        (defaults.http.max_connections / 4).max(1)
    );
    assert_eq!(defaults.name, defaults.listen.to_string());
    assert_eq!(
        defaults.rate_limits_when_redis_down,
        crate::limits::WhenRedisDown::Share
    );
    let set = with(&[
        ("mcp.session_ttl_secs", serde_json::json!(0)),
        ("mcp.max_body_bytes", serde_json::json!(4096)),
        ("mcp.max_argument_bytes", serde_json::json!(1_000_000)),
        ("mcp.request_state_key", serde_json::json!("k".repeat(32))),
        ("mcp.max_streams_per_tenant", serde_json::json!(7)),
        (
            "cache.rate_limits_when_redis_down",
            serde_json::json!("closed"),
        ),
        ("shutdown.grace_ms", serde_json::json!(1500)),
        (
            "audit.spill_dir",
            serde_json::json!("/var/lib/toolplane/audit"),
        ),
        ("audit.spill_max_mb", serde_json::json!(3)),
    ]);
    assert!(set.mcp.session_ttl.is_none(), "0 issues no session ids");
    assert_eq!(set.mcp.max_argument_bytes, 4096, "never more than the body");
    assert_eq!(set.mcp.state_secret, "k".repeat(32));
    assert_eq!(set.mcp.max_streams_per_tenant, 7);
    assert_eq!(
        set.rate_limits_when_redis_down,
        crate::limits::WhenRedisDown::Closed
    );
    assert_eq!(set.shutdown.grace, Duration::from_millis(1500));
    assert_eq!(
        set.audit.buffer.spill_dir.as_deref(),
        Some(std::path::Path::new("/var/lib/toolplane/audit"))
    );
    assert_eq!(set.audit.buffer.spill_max_bytes, 3 << 20);
}
