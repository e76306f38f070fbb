//! An upstream's tool in the catalogue's terms: what `toolplanectl executors import` admits,
//! and what the control plane's drift check and `executors drift` compare with the admitted
//! definition.

use serde_json::Value;
use tp_registry::tool::{Annotations, UpstreamDefinition};

use crate::UpstreamTool;

/// The catalogue name (`prefix` + the upstream's name) and definition of one upstream tool:
/// its title (or the annotations' title), description (a stand-in naming `executor` when the
/// upstream gives none, cut to the catalogue's limit), schemas as the catalogue stores them
/// (through `google.protobuf.Struct`, where every number is a double) and annotations.
pub fn definition(
    tool: &UpstreamTool,
    prefix: &str,
    executor: &str,
) -> (String, UpstreamDefinition) {
    let upstream_name = tool.name.to_string();
    let value = serde_json::to_value(tool).unwrap_or_default();
    let annotations = &value["annotations"];
    let description = tool
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map_or_else(
            || format!("{upstream_name} (from the MCP server {executor})"),
            str::to_owned,
        );
    let stored = |schema: &Value| {
        tp_proto::json::to_struct(schema)
            .map(|s| tp_proto::json::from_struct(&s))
            .unwrap_or_else(|| schema.clone())
    };
    let definition = UpstreamDefinition {
        title: value["title"]
            .as_str()
            .or_else(|| annotations["title"].as_str())
            .unwrap_or_default()
            .to_owned(),
        description: description
            .chars()
            .take(tp_registry::ident::MAX_DESCRIPTION)
            .collect(),
        input_schema: stored(&value["inputSchema"]),
        output_schema: value
            .get("outputSchema")
            .filter(|schema| schema.is_object())
            .map(stored),
        annotations: Annotations {
            read_only: annotations["readOnlyHint"].as_bool(),
            destructive: annotations["destructiveHint"].as_bool(),
            idempotent: annotations["idempotentHint"].as_bool(),
            open_world: annotations["openWorldHint"].as_bool(),
        },
    };
    (format!("{prefix}{upstream_name}"), definition)
}
