use serde_json::json;

use super::*;
use crate::adr::AdrStatus;

struct Refs;

impl CatalogRefs for Refs {
    fn has_provider(&self, id: &str) -> bool {
        matches!(id, "google" | "hubspot")
    }
    fn has_role(&self, name: &str) -> bool {
        matches!(name, "collector" | "executor")
    }
    fn has_executor(&self, name: &str) -> bool {
        name == "demo"
    }
    fn adr_status(&self, id: &str) -> Option<AdrStatus> {
        match id {
            "ADR-037" => Some(AdrStatus::Accepted),
            "ADR-099" => Some(AdrStatus::Proposed),
            _ => None,
        }
    }
}

fn plain(name: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: "Echo".into(),
        description: "Echo the text back".into(),
        category: "demo".into(),
        provider: None,
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        output_schema: None,
        annotations: Annotations::default(),
        executor: "demo".into(),
        roles: vec![],
        examples: vec![],
        client_capabilities: vec![],
        bucket: None,
        admission: Admission {
            adr: Some("ADR-037".into()),
            owner: None,
            scope: None,
        },
        polymorphism: None,
    }
}

fn wiki() -> ToolDef {
    ToolDef {
        input_schema: json!({}),
        polymorphism: Some(Polymorphism {
            discriminator: String::new(),
            actions: vec![
                Action {
                    name: "ingest".into(),
                    description: "Add a source".into(),
                    schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}),
                    roles: vec!["collector".into()],
                },
                Action {
                    name: "query".into(),
                    description: "Ask".into(),
                    schema: json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"], "additionalProperties": false}),
                    roles: vec![],
                },
            ],
        }),
        ..plain("client_wiki")
    }
}

fn fields(err: &DomainError) -> Vec<&str> {
    err.violations.iter().map(|v| v.field.as_str()).collect()
}

#[test]
fn a_valid_tool_passes_and_is_normalised() {
    let mut def = plain("echo");
    def.roles = vec!["executor".into(), "collector".into(), "executor".into()];
    let def = def.validate(&Refs).unwrap();
    assert_eq!(def.roles, vec!["collector", "executor"]);
    assert_eq!(def.effective_bucket(), Bucket::Platform);
}

#[test]
fn every_bad_field_is_reported_at_once() {
    let mut def = plain("bad name!");
    def.description = " ".into();
    def.category = "Not A Slug".into();
    def.provider = Some("salesforce".into());
    def.executor = "nowhere".into();
    def.roles = vec!["admin".into()];
    def.examples = vec![String::new()];
    def.admission = Admission::default();
    let err = def.validate(&Refs).unwrap_err();
    assert_eq!(err.code, crate::ErrorCode::InvalidArgument);
    assert_eq!(
        fields(&err),
        vec![
            "tool.name",
            "tool.description",
            "tool.category",
            "tool.provider",
            "tool.executor",
            "tool.roles",
            "tool.examples[0]",
            "tool.admission",
        ]
    );
}

#[test]
fn schemas_are_validated_as_schemas() {
    let cases = [
        (json!("string"), "must be a JSON object"),
        (json!({"type": "array"}), "\"type\": \"object\""),
        (
            json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
            "not a valid JSON Schema",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}),
            "regex",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
            "compile",
        ),
    ];
    for (schema, expected) in cases {
        let mut def = plain("echo");
        def.input_schema = schema.clone();
        let err = def.validate(&Refs).unwrap_err();
        assert_eq!(fields(&err), vec!["tool.input_schema"], "{schema}");
        assert!(err.message.contains(expected), "{schema}: {}", err.message);
    }
}

#[test]
fn oversized_schemas_are_refused() {
    let mut properties = serde_json::Map::new();
    for i in 0..3000 {
        properties.insert(format!("field_{i:05}"), json!({"type": "string"}));
    }
    let mut def = plain("echo");
    def.input_schema = json!({"type": "object", "properties": properties});
    let err = def.validate(&Refs).unwrap_err();
    assert!(
        err.message.contains("the limit is 65536 bytes"),
        "{}",
        err.message
    );
}

#[test]
fn admission_needs_an_accepted_adr_or_owner_and_scope() {
    let mut def = plain("echo");
    def.admission = Admission {
        adr: Some("ADR-099".into()),
        owner: None,
        scope: None,
    };
    assert!(
        def.clone()
            .validate(&Refs)
            .unwrap_err()
            .message
            .contains("proposed, not accepted")
    );
    def.admission = Admission {
        adr: Some("ADR-100".into()),
        owner: None,
        scope: None,
    };
    assert!(
        def.clone()
            .validate(&Refs)
            .unwrap_err()
            .message
            .contains("unknown ADR")
    );
    def.admission = Admission {
        adr: None,
        owner: Some("team".into()),
        scope: None,
    };
    assert!(def.clone().validate(&Refs).is_err());
    def.admission = Admission {
        adr: None,
        owner: Some("team".into()),
        scope: Some("demo".into()),
    };
    assert!(def.validate(&Refs).is_ok());
}

#[test]
fn polymorphic_schema_is_composed_with_the_default_discriminator() {
    let def = wiki().validate(&Refs).unwrap();
    let poly = def.polymorphism.as_ref().unwrap();
    assert_eq!(poly.discriminator, "action");
    assert_eq!(
        def.input_schema["properties"]["action"]["enum"],
        json!(["ingest", "query"])
    );
    let branches = def.input_schema["oneOf"].as_array().unwrap();
    assert_eq!(branches.len(), 2);
    assert_eq!(
        branches[0]["properties"]["action"],
        json!({"const": "ingest"})
    );
    assert_eq!(branches[0]["required"], json!(["action", "text"]));
    // The composed schema validates exactly one branch.
    let validator = jsonschema::validator_for(&def.input_schema).unwrap();
    assert!(validator.is_valid(&json!({"action": "ingest", "text": "hi"})));
    assert!(validator.is_valid(&json!({"action": "query", "question": "why?"})));
    assert!(!validator.is_valid(&json!({"action": "query", "text": "hi"})));
    assert!(!validator.is_valid(&json!({"action": "lint"})));
    assert!(!validator.is_valid(&json!({"text": "hi"})));
}

#[test]
fn polymorphic_mistakes_are_reported() {
    let mut def = wiki();
    def.input_schema = json!({"type": "object"});
    let poly = def.polymorphism.as_mut().unwrap();
    poly.discriminator = "9bad".into();
    poly.actions[1].name = "ingest".into();
    poly.actions[0].schema = json!({"type": "object", "properties": {"9bad": {"type": "string"}}});
    let err = def.validate(&Refs).unwrap_err();
    assert_eq!(
        fields(&err),
        vec![
            "tool.input_schema",
            "tool.polymorphism.discriminator",
            "tool.polymorphism.actions[0].schema",
            "tool.polymorphism.actions[1].name",
        ]
    );
}

#[test]
fn action_roles_must_be_able_to_see_the_tool() {
    let mut def = wiki();
    def.roles = vec!["executor".into()];
    let err = def.validate(&Refs).unwrap_err();
    assert_eq!(fields(&err), vec!["tool.polymorphism.actions[0].roles"]);
    assert!(err.message.contains("cannot see the tool"));
}

#[test]
fn empty_actions_are_refused() {
    let mut def = wiki();
    def.polymorphism.as_mut().unwrap().actions.clear();
    let err = def.validate(&Refs).unwrap_err();
    assert_eq!(fields(&err), vec!["tool.polymorphism.actions"]);
}

#[test]
fn an_invalid_schema_lists_every_problem() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"type": "strng"},
            "b": {"minLength": -1},
            "c": {"maxLenght": 3}
        }
    });
    let error = super::check_object_schema(&schema).unwrap_err();
    assert!(error.contains("3 problems"), "{error}");
    for needle in ["/properties/a", "/properties/b", "maxLenght"] {
        assert!(error.contains(needle), "{needle}: {error}");
    }
}
