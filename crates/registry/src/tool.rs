//! Tools: their definition, validation, status, and the role projection of polymorphic tools.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{DomainError, DomainResult, Violations};
use crate::ident::{
    MAX_ACTIONS, MAX_CATEGORY, MAX_DESCRIPTION, MAX_EXAMPLE, MAX_EXAMPLES, MAX_OWNER, MAX_ROLES,
    MAX_SCHEMA_BYTES, MAX_TITLE, check_adr_id, check_slug, check_text, check_tool_name,
};

/// MCP client capabilities a tool may require.
pub const CLIENT_CAPABILITIES: [&str; 3] = ["elicitation", "roots", "sampling"];

/// Names the edges serve themselves (progressive disclosure, ADR 0006); no catalogue tool may
/// take them.
pub const META_TOOLS: [&str; 4] = [
    "capabilities",
    "tool_schema",
    "dispatch",
    "dispatch_parallel",
];

/// Default discriminator property of polymorphic tools (ADR-037 uses `action`).
pub const DEFAULT_DISCRIMINATOR: &str = "action";

/// Lifecycle of a tool. Deprecated tools still count against the ceiling; retired ones do not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ToolStatus {
    /// Listed and callable.
    Active,
    /// Listed and callable until the sunset date (`YYYY-MM-DD`).
    Deprecated {
        /// The announced removal date.
        sunset: String,
    },
    /// Kept for the record; never listed, never callable, not counted.
    Retired,
}

/// Which ceiling bucket a tool counts in (ADR-037 reports "25 curated + 8 platform").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Tools curated for a provider or a product feature.
    Curated,
    /// Platform and meta tools.
    Platform,
}

/// Why a tool is allowed to exist: an accepted ADR, or an owner and a scope (a TOOLS.md row).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    /// The accepted ADR that admitted the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adr: Option<String>,
    /// The team or person answerable for the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// What the tool is for, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// MCP tool annotations (hints to clients; `idempotent` also allows retries on connect errors).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// The tool does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The tool may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Calling the tool twice with the same arguments has no additional effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// The tool interacts with an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// One action of a polymorphic tool: its schema branch and the roles allowed to use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The discriminator value, e.g. `ingest`.
    pub name: String,
    /// One line on what the action does.
    #[serde(default)]
    pub description: String,
    /// Object schema of the action's other fields (without the discriminator).
    pub schema: Value,
    /// Roles allowed to use the action; empty = every role that sees the tool.
    #[serde(default)]
    pub roles: Vec<String>,
}

/// The discriminated union of a polymorphic tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Polymorphism {
    /// The discriminator property (default `action`).
    pub discriminator: String,
    /// The actions, in declaration order.
    pub actions: Vec<Action>,
}

/// What an operator submits to register or update a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// Unique name, 1–128 characters of `[A-Za-z0-9_.-]`.
    pub name: String,
    /// Human title.
    #[serde(default)]
    pub title: String,
    /// What the tool does (shown to models).
    pub description: String,
    /// Category for progressive disclosure (slug).
    pub category: String,
    /// Provider the tool needs; `None` = platform tool visible to every tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// JSON Schema of the arguments (composed from the actions for polymorphic tools).
    pub input_schema: Value,
    /// Optional JSON Schema of `structuredContent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// MCP annotations.
    #[serde(default)]
    pub annotations: Annotations,
    /// The executor that runs the tool.
    pub executor: String,
    /// Roles that may see the tool; empty = all.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Example prompts or calls.
    #[serde(default)]
    pub examples: Vec<String>,
    /// MCP client capabilities the tool needs (`sampling`, `elicitation`, `roots`). A
    /// 2026-07-28 caller that does not declare one gets -32021 before anything runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_capabilities: Vec<String>,
    /// Ceiling bucket; `None` = platform when there is no provider, curated otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<Bucket>,
    /// The ADR or owner + scope that admitted the tool.
    #[serde(default)]
    pub admission: Admission,
    /// Set for polymorphic tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polymorphism: Option<Polymorphism>,
}

/// A tool as the catalogue holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The definition (with the composed input schema for polymorphic tools).
    #[serde(flatten)]
    pub def: ToolDef,
    /// Lifecycle state.
    pub status: ToolStatus,
    /// Revision of the last change to this tool.
    #[serde(default)]
    pub revision: u64,
    /// The admitted definition's hash, who admitted it, on what basis and at which revision
    /// (absent on tools stored before pins existed, until their next update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Pin>,
    /// What the admission lint flagged (and let through) in this definition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// MCP upstreams' tools: what the upstream now says that differs from the admitted
    /// definition (quarantined: never served; the tool hidden when `drift.hidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

/// What an MCP upstream says of one of its tools, in the catalogue's terms (the name carries
/// the executor's prefix; schemas as the catalogue stores them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamDefinition {
    /// The title the upstream server gives the tool.
    #[serde(default)]
    pub title: String,
    /// The description the upstream server gives it.
    #[serde(default)]
    pub description: String,
    /// The upstream's input schema, as listed.
    pub input_schema: Value,
    /// The upstream's output schema, when it lists one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The upstream's annotations (hints), as listed.
    #[serde(default)]
    pub annotations: Annotations,
}

impl UpstreamDefinition {
    /// `sha256:` over the canonical JSON of the definition.
    pub fn hash(&self) -> String {
        canonical_hash(&serde_json::to_value(self).unwrap_or_default())
    }
}

/// A quarantined change of an upstream's tool: the upstream's new definition, which fields
/// differ from the admitted one, and whether the tool is hidden meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// [`UpstreamDefinition::hash`] of what the upstream says.
    pub hash: String,
    /// The fields that differ: `title`, `description`, `input_schema`, `output_schema`,
    /// `annotations`.
    pub fields: Vec<String>,
    /// What the upstream says.
    pub upstream: UpstreamDefinition,
    /// Hidden from every registry until an admin admits or rejects the change (the control
    /// plane's `lifecycle.on_drift`); otherwise the admitted text keeps being served.
    pub hidden: bool,
    /// The revision that recorded this drift (set when the change is applied).
    #[serde(default)]
    pub revision: u64,
}

/// One finding of the admission lint ([`crate::lint`]) in one field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule's name (`hidden-unicode`, `model-instruction`, `url-in-description`,
    /// `email-in-description`, `secret-field`).
    pub rule: String,
    /// Where: `tool.description`, `tool.input_schema.properties.token`, ...
    pub field: String,
    /// What was found, quoted (invisible characters written as `U+XXXX`).
    pub found: String,
}

/// The record of one admission: the content hash of what was admitted, by whom, on what
/// basis, and at which revision (the change log has its time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// `sha256:` and the hex digest of [`ToolDef::content_hash`]'s canonical form.
    pub hash: String,
    /// The write's author (`admin`, a token id, `oidc:<name>`, `system` for seeds).
    pub by: String,
    /// `adr:<id>` or `owner:<owner> (scope: <scope>)`.
    pub basis: String,
    /// The revision that admitted this definition (set when the change is applied).
    #[serde(default)]
    pub revision: u64,
}

impl Pin {
    /// The pin of `def` admitted by `by`, its revision set when the change is applied.
    pub fn new(def: &ToolDef, by: &str) -> Pin {
        let basis = match (&def.admission.adr, &def.admission.owner) {
            (Some(adr), _) => format!("adr:{adr}"),
            (None, Some(owner)) => format!(
                "owner:{owner} (scope: {})",
                def.admission.scope.as_deref().unwrap_or_default()
            ),
            (None, None) => String::new(),
        };
        Pin {
            hash: def.content_hash(),
            by: by.to_owned(),
            basis,
            revision: 0,
        }
    }
}

/// What validation needs to know about the rest of the catalogue.
pub trait CatalogRefs {
    /// Whether a provider id is registered.
    fn has_provider(&self, id: &str) -> bool;
    /// Whether a role is registered.
    fn has_role(&self, name: &str) -> bool;
    /// Whether an executor is registered.
    fn has_executor(&self, name: &str) -> bool;
    /// Whether an ADR exists and is accepted.
    fn adr_status(&self, id: &str) -> Option<crate::adr::AdrStatus>;
}

// === impl ToolStatus ===

impl ToolStatus {
    /// Whether the tool counts against the ceiling and is visible.
    pub fn is_live(&self) -> bool {
        !matches!(self, ToolStatus::Retired)
    }

    /// Short name: `active`, `deprecated`, `retired`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ToolStatus::Active => "active",
            ToolStatus::Deprecated { .. } => "deprecated",
            ToolStatus::Retired => "retired",
        }
    }
}

// === impl Bucket ===

impl Bucket {
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::Curated => "curated",
            Bucket::Platform => "platform",
        }
    }
}

// === impl ToolDef ===

impl ToolDef {
    /// The bucket the tool counts in.
    pub fn effective_bucket(&self) -> Bucket {
        match (self.bucket, &self.provider) {
            (Some(bucket), _) => bucket,
            (None, None) => Bucket::Platform,
            (None, Some(_)) => Bucket::Curated,
        }
    }

    /// The hash of what models are shown of this tool and what it is bound to: name, title,
    /// description, category, provider, schemas, annotations, actions, roles, executor and
    /// required capabilities, as canonical JSON (object keys sorted), SHA-256, hex.
    pub fn content_hash(&self) -> String {
        let shown = serde_json::json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "category": self.category,
            "provider": self.provider,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations,
            "polymorphism": self.polymorphism,
            "roles": self.roles,
            "executor": self.executor,
            "client_capabilities": self.client_capabilities,
        });
        canonical_hash(&shown)
    }

    /// The fields models are shown that differ between this definition and what an upstream
    /// says of the tool (descriptions compared without surrounding white space).
    pub fn differs_from(&self, upstream: &UpstreamDefinition) -> Vec<String> {
        let mut fields = Vec::new();
        if self.title.trim() != upstream.title.trim() {
            fields.push("title".to_owned());
        }
        if self.description.trim() != upstream.description.trim() {
            fields.push("description".to_owned());
        }
        if self.input_schema != upstream.input_schema {
            fields.push("input_schema".to_owned());
        }
        if self.output_schema != upstream.output_schema {
            fields.push("output_schema".to_owned());
        }
        if self.annotations != upstream.annotations {
            fields.push("annotations".to_owned());
        }
        fields
    }

    /// Validates the definition against the catalogue and returns it normalised: trimmed,
    /// roles sorted and deduplicated, and the input schema composed for polymorphic tools.
    pub fn validate(mut self, refs: &dyn CatalogRefs) -> DomainResult<ToolDef> {
        let mut v = Violations::default();
        v.check("tool.name", check_tool_name(&self.name));
        if META_TOOLS.contains(&self.name.as_str()) {
            v.check(
                "tool.name",
                Err(format!(
                    "{:?} is reserved for the edges' progressive-disclosure meta-tools ({}; docs/adr/0006)",
                    self.name,
                    META_TOOLS.join(", ")
                )),
            );
        }
        v.check("tool.title", check_text(&self.title, MAX_TITLE, false));
        v.check(
            "tool.description",
            check_text(&self.description, MAX_DESCRIPTION, true),
        );
        v.check("tool.category", check_category(&self.category));
        check_references(self.provider.as_deref(), &self.executor, refs, &mut v);
        normalise_roles(&mut self.roles);
        check_roles("tool.roles", &self.roles, refs, &mut v);
        self.client_capabilities.sort();
        self.client_capabilities.dedup();
        check_capabilities(&self.client_capabilities, &mut v);
        check_examples(&self.examples, &mut v);
        check_admission(&self.admission, refs, &mut v);
        if let Some(output) = &self.output_schema {
            v.check("tool.output_schema", check_object_schema(output));
        }
        match &mut self.polymorphism {
            Some(poly) => {
                if !is_empty_schema(&self.input_schema) {
                    v.add(
                        "tool.input_schema",
                        "must be empty for a polymorphic tool: it is composed from the actions",
                    );
                }
                let tool_roles = self.roles.clone();
                check_polymorphism(poly, &tool_roles, refs, &mut v);
            }
            None => v.check("tool.input_schema", check_object_schema(&self.input_schema)),
        }
        v.finish()?;
        if let Some(poly) = &self.polymorphism {
            let all: Vec<&Action> = poly.actions.iter().collect();
            self.input_schema = compose_schema(&poly.discriminator, &all);
            // The composed schema must itself compile (it always does when branches do).
            check_object_schema(&self.input_schema)
                .map_err(|e| DomainError::invalid("tool.polymorphism", e))?;
        }
        self.title = self.title.trim().to_owned();
        Ok(self)
    }
}

/// The provider (if any) and the executor a tool names: slugs the catalogue has.
fn check_references(
    provider: Option<&str>,
    executor: &str,
    refs: &dyn CatalogRefs,
    v: &mut Violations,
) {
    if let Some(provider) = provider {
        match check_slug(provider) {
            Err(e) => v.add("tool.provider", e),
            Ok(()) if !refs.has_provider(provider) => v.add(
                "tool.provider",
                format!("unknown provider {provider:?}: register it first"),
            ),
            Ok(()) => {}
        }
    }
    match check_slug(executor) {
        Err(e) => v.add("tool.executor", e),
        Ok(()) if !refs.has_executor(executor) => v.add(
            "tool.executor",
            format!("unknown executor {executor:?}: register it first"),
        ),
        Ok(()) => {}
    }
}

/// Client capabilities a tool needs: ones MCP defines.
fn check_capabilities(capabilities: &[String], v: &mut Violations) {
    for capability in capabilities {
        if !CLIENT_CAPABILITIES.contains(&capability.as_str()) {
            v.check(
                "tool.client_capabilities",
                Err(format!(
                    "{capability:?} is not one of {}",
                    CLIENT_CAPABILITIES.join(", ")
                )),
            );
        }
    }
}

/// At most [`MAX_EXAMPLES`] examples, each text of at most [`MAX_EXAMPLE`] characters.
fn check_examples(examples: &[String], v: &mut Violations) {
    if examples.len() > MAX_EXAMPLES {
        v.add(
            "tool.examples",
            format!("at most {MAX_EXAMPLES} examples (got {})", examples.len()),
        );
    }
    for (i, example) in examples.iter().enumerate() {
        v.check(
            &format!("tool.examples[{i}]"),
            check_text(example, MAX_EXAMPLE, true),
        );
    }
}

/// Categories: slugs of at most 64 characters.
fn check_category(category: &str) -> Result<(), String> {
    if category.len() > MAX_CATEGORY {
        return Err(format!("must be at most {MAX_CATEGORY} characters"));
    }
    check_slug(category)
}

fn normalise_roles(roles: &mut Vec<String>) {
    roles.sort();
    roles.dedup();
}

fn check_roles(field: &str, roles: &[String], refs: &dyn CatalogRefs, v: &mut Violations) {
    if roles.len() > MAX_ROLES {
        v.add(field, format!("at most {MAX_ROLES} roles"));
        return;
    }
    for role in roles {
        match check_slug(role) {
            Err(e) => v.add(field, format!("role {role:?}: {e}")),
            Ok(()) if !refs.has_role(role) => {
                v.add(field, format!("unknown role {role:?}: register it first"));
            }
            Ok(()) => {}
        }
    }
}

fn check_admission(admission: &Admission, refs: &dyn CatalogRefs, v: &mut Violations) {
    let owner = admission.owner.as_deref().unwrap_or("").trim();
    let scope = admission.scope.as_deref().unwrap_or("").trim();
    v.check("tool.admission.owner", check_text(owner, MAX_OWNER, false));
    v.check("tool.admission.scope", check_text(scope, MAX_OWNER, false));
    match admission.adr.as_deref() {
        Some(adr) => match check_adr_id(adr) {
            Err(e) => v.add("tool.admission.adr", e),
            Ok(()) => match refs.adr_status(adr) {
                None => v.add("tool.admission.adr", format!("unknown ADR {adr:?}")),
                Some(crate::adr::AdrStatus::Accepted) => {}
                Some(status) => v.add(
                    "tool.admission.adr",
                    format!("ADR {adr} is {}, not accepted", status.as_str()),
                ),
            },
        },
        None if owner.is_empty() || scope.is_empty() => v.add(
            "tool.admission",
            "a tool must cite an accepted ADR, or carry both an owner and a scope",
        ),
        None => {}
    }
}

fn check_polymorphism(
    poly: &mut Polymorphism,
    tool_roles: &[String],
    refs: &dyn CatalogRefs,
    v: &mut Violations,
) {
    if poly.discriminator.is_empty() {
        poly.discriminator = DEFAULT_DISCRIMINATOR.to_owned();
    }
    if !is_property_name(&poly.discriminator) {
        v.add(
            "tool.polymorphism.discriminator",
            "must be a property name of [A-Za-z_][A-Za-z0-9_]{0,63}",
        );
    }
    if poly.actions.is_empty() || poly.actions.len() > MAX_ACTIONS {
        v.add(
            "tool.polymorphism.actions",
            format!("must hold 1 to {MAX_ACTIONS} actions"),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, action) in poly.actions.iter_mut().enumerate() {
        let field = format!("tool.polymorphism.actions[{i}]");
        if let Err(e) = check_slug(&action.name) {
            v.add(format!("{field}.name"), e);
        } else if !seen.insert(action.name.clone()) {
            v.add(
                format!("{field}.name"),
                format!("duplicate action {:?}", action.name),
            );
        }
        v.check(
            &format!("{field}.description"),
            check_text(&action.description, MAX_DESCRIPTION, false),
        );
        match check_object_schema(&action.schema) {
            Err(e) => v.add(format!("{field}.schema"), e),
            Ok(()) => {
                let defines_discriminator = action
                    .schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| p.contains_key(&poly.discriminator));
                if defines_discriminator {
                    v.add(
                        format!("{field}.schema"),
                        format!(
                            "must not define the discriminator {:?}: it is added for you",
                            poly.discriminator
                        ),
                    );
                }
            }
        }
        normalise_roles(&mut action.roles);
        check_roles(&format!("{field}.roles"), &action.roles, refs, v);
        if !tool_roles.is_empty() {
            for role in &action.roles {
                if !tool_roles.contains(role) {
                    v.add(
                        format!("{field}.roles"),
                        format!("role {role:?} cannot see the tool (tool roles: {tool_roles:?})"),
                    );
                }
            }
        }
    }
}

fn is_property_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && name.len() <= 64 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_empty_schema(schema: &Value) -> bool {
    match schema {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Checks that a value is a valid JSON Schema whose root is `"type": "object"` (MCP requires
/// object input schemas), no larger than 64 KiB, and compilable without remote references.
pub fn check_object_schema(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err("must be a JSON object".into());
    };
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err("must have \"type\": \"object\" at the root".into());
    }
    let size = serde_json::to_vec(schema)
        .map(|b| b.len())
        .unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "is {size} bytes; the limit is {MAX_SCHEMA_BYTES} bytes"
        ));
    }
    // Every problem at once, not the first: a schema is fixed in one round.
    let invalid: Vec<String> = match jsonschema::meta::validator_for(schema) {
        Ok(meta) => meta
            .iter_errors(schema)
            .map(|error| {
                format!(
                    "{error} (at {})",
                    display_pointer(&error.instance_path().to_string())
                )
            })
            .collect(),
        Err(error) => vec![error.to_string()],
    };
    let unknown = crate::schema::check_keywords(schema).err();
    if !invalid.is_empty() || unknown.is_some() {
        let mut problems = invalid;
        problems.extend(unknown);
        return Err(if problems.len() == 1 {
            format!("is not a valid JSON Schema: {}", problems[0])
        } else {
            format!(
                "is not a valid JSON Schema ({} problems): {}",
                problems.len(),
                problems.join("; ")
            )
        });
    }
    if let Err(error) = jsonschema::validator_for(schema) {
        return Err(format!("does not compile: {error}"));
    }
    crate::schema::compile_linear(schema)?;
    Ok(())
}

fn display_pointer(pointer: &str) -> String {
    if pointer.is_empty() {
        "/".to_owned()
    } else {
        pointer.to_owned()
    }
}

/// Composes the input schema of a polymorphic tool from a subset of its actions: the
/// discriminator's `enum` lists exactly these actions and `oneOf` holds exactly their branches.
pub fn compose_schema(discriminator: &str, actions: &[&Action]) -> Value {
    let names: Vec<Value> = actions
        .iter()
        .map(|a| Value::from(a.name.clone()))
        .collect();
    let branches: Vec<Value> = actions
        .iter()
        .map(|action| branch_schema(discriminator, action))
        .collect();
    json!({
        "type": "object",
        "properties": {
            discriminator: {
                "type": "string",
                "enum": names,
                "description": "Which action to run",
            }
        },
        "required": [discriminator],
        "oneOf": branches,
    })
}

fn branch_schema(discriminator: &str, action: &Action) -> Value {
    let mut branch: Map<String, Value> = action.schema.as_object().cloned().unwrap_or_default();
    let mut properties = Map::new();
    properties.insert(discriminator.to_owned(), json!({ "const": action.name }));
    if let Some(Value::Object(own)) = branch.remove("properties") {
        properties.extend(own);
    }
    let mut required = vec![Value::from(discriminator)];
    if let Some(Value::Array(own)) = branch.remove("required") {
        required.extend(own);
    }
    branch.insert("type".into(), Value::from("object"));
    branch.insert("properties".into(), Value::Object(properties));
    branch.insert("required".into(), Value::Array(required));
    if !action.description.is_empty() && !branch.contains_key("description") {
        branch.insert(
            "description".into(),
            Value::from(action.description.clone()),
        );
    }
    Value::Object(branch)
}

/// Whether a role may see something restricted to `roles` (empty = everyone).
pub fn role_allowed(roles: &[String], role: &str) -> bool {
    roles.is_empty() || roles.iter().any(|r| r == role)
}

// === impl Tool ===

impl Tool {
    /// The actions `role` may use, or `None` for a non-polymorphic tool.
    pub fn allowed_actions(&self, role: &str) -> Option<Vec<&Action>> {
        let poly = self.def.polymorphism.as_ref()?;
        Some(
            poly.actions
                .iter()
                .filter(|action| role_allowed(&action.roles, role))
                .collect(),
        )
    }
}

mod widen;

#[cfg(test)]
mod tests;

/// `sha256:` and the hex SHA-256 of `value`'s canonical JSON.
fn canonical_hash(value: &Value) -> String {
    use sha2::Digest as _;
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    let digest = sha2::Sha256::digest(canonical.as_bytes());
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// `value` as JSON with every object's keys in sorted order (whatever order the map keeps).
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
