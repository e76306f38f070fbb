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
    assert_eq!(config.mcp.page_size, 100);
    assert!(config.redis_url.is_none() && config.anonymous.is_none());
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
        ("typo", serde_json::json!(1), "typo"),
    ] {
        let err = load(base().merge(Serialized::default(key, value))).unwrap_err();
        assert!(format!("{err:#}").contains(needle), "{key}: {err:#}");
    }
}

#[test]
fn the_example_config_in_deploy_loads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/config/edge.toml");
    let config = load(figment(Some(&path)).merge(Serialized::default(
        "edge_token",
        "an-edge-token-long-enough",
    )))
    .unwrap();
    let defaults = load(base()).unwrap();
    assert_eq!(config.listen, defaults.listen);
    assert_eq!(config.mcp.page_size, defaults.mcp.page_size);
    assert_eq!(config.cache.l1_ttl_secs, defaults.cache.l1_ttl_secs);
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
    assert_eq!(config.cache.redis_sentinel_master, "tp");
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
