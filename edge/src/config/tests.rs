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
