//! Executor results (`toolplane.v1.Result`) as MCP `CallToolResult`s, content types intact.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{CallToolResult, ContentBlock, Resource, ResourceContents};
use tp_proto::pb;

fn block(block: pb::ContentBlock) -> Option<ContentBlock> {
    use pb::content_block::Block;
    Some(match block.block? {
        Block::Text(text) => ContentBlock::text(text),
        Block::Image(media) => ContentBlock::image(STANDARD.encode(&media.data), media.mime_type),
        Block::Audio(media) => ContentBlock::audio(STANDARD.encode(&media.data), media.mime_type),
        Block::Resource(resource) => {
            let mime_type = (!resource.mime_type.is_empty()).then_some(resource.mime_type);
            let contents = match resource.contents {
                Some(pb::embedded_resource::Contents::Blob(blob)) => {
                    ResourceContents::BlobResourceContents {
                        uri: resource.uri,
                        mime_type,
                        blob: STANDARD.encode(blob),
                        meta: None,
                    }
                }
                Some(pb::embedded_resource::Contents::Text(text)) => {
                    ResourceContents::TextResourceContents {
                        uri: resource.uri,
                        mime_type,
                        text,
                        meta: None,
                    }
                }
                None => ResourceContents::TextResourceContents {
                    uri: resource.uri,
                    mime_type,
                    text: String::new(),
                    meta: None,
                },
            };
            ContentBlock::resource(contents)
        }
        Block::ResourceLink(link) => {
            let mut resource = Resource::new(link.uri, link.name);
            if !link.mime_type.is_empty() {
                resource.mime_type = Some(link.mime_type);
            }
            if !link.description.is_empty() {
                resource = resource.with_description(link.description);
            }
            ContentBlock::resource_link(resource)
        }
    })
}

/// Converts an executor result.
pub(super) fn call_result(result: pb::Result) -> CallToolResult {
    let content: Vec<ContentBlock> = result.content.into_iter().filter_map(block).collect();
    let mut converted = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    if let Some(structured) = result.structured {
        converted.structured_content = Some(tp_proto::json::from_struct(&structured));
    }
    converted
}
