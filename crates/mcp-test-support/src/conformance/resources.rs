//! Resources: three static ones, one template, subscriptions, and the
//! not-found error SEP-2164 asks for.

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{
        ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
        ResourceContents, ResourceTemplate,
    },
};
use serde_json::json;

use super::{
    fixtures::{PNG_BASE64, WATCHED_RESOURCE},
    skills,
    state::{Session, lock},
};

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const TEMPLATE: &str = "test://template/{id}/data";

/// The static resources, then the skill's files (SEP-2640 serves skills as
/// resources). `caching` reads the first one listed.
pub(crate) fn list() -> ListResourcesResult {
    let mut resources = vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_title("Static Text Resource")
            .with_description("A static text resource")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_title("Static Binary Resource")
            .with_description("A static binary resource (a PNG image)")
            .with_mime_type("image/png"),
        Resource::new(WATCHED_RESOURCE, "watched-resource")
            .with_title("Watched Resource")
            .with_description("A resource clients may subscribe to")
            .with_mime_type("text/plain"),
    ];
    resources.extend(skills::resources());
    ListResourcesResult::with_all_items(resources)
}

pub(crate) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(TEMPLATE, "template")
            .with_title("Resource Template")
            .with_description("Data for any id: test://template/{id}/data")
            .with_mime_type("application/json"),
    ])
}

/// The `{id}` of a URI that matches [`TEMPLATE`].
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// Reads one resource.
///
/// # Errors
///
/// An unknown URI is `resource_not_found` with the URI in `data`; rmcp
/// turns its code into `-32602` for 2026-07-28 clients (SEP-2164) and keeps
/// `-32002` for older ones, as each revision says.
pub(crate) fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    if let Some(file) = skills::read(uri) {
        return Ok(ReadResourceResult::new(vec![file]));
    }
    let contents = match uri {
        STATIC_TEXT => {
            ResourceContents::text("This is the content of the static text resource.", uri)
                .with_mime_type("text/plain")
        }
        STATIC_BINARY => ResourceContents::blob(PNG_BASE64, uri).with_mime_type("image/png"),
        WATCHED_RESOURCE => {
            ResourceContents::text("Watched resource content", uri).with_mime_type("text/plain")
        }
        _ => match template_id(uri) {
            Some(id) => ResourceContents::text(
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
                uri,
            )
            .with_mime_type("application/json"),
            None => {
                return Err(ErrorData::resource_not_found(
                    "Resource not found",
                    Some(json!({"uri": uri})),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// `resources/subscribe`: remembered for the session; only known URIs.
pub(crate) fn subscribe(session: &Arc<Session>, uri: &str) -> Result<(), ErrorData> {
    read(uri)?;
    lock(&session.subscribed).insert(uri.to_owned());
    Ok(())
}

pub(crate) fn unsubscribe(session: &Arc<Session>, uri: &str) {
    lock(&session.subscribed).remove(uri);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_ids() {
        assert_eq!(template_id("test://template/123/data"), Some("123"));
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/1/2/data"), None);
        assert_eq!(template_id("test://static-text"), None);
    }

    #[test]
    fn unknown_uris_name_themselves() {
        let error = read("test://nope").unwrap_err();
        assert_eq!(error.data, Some(json!({"uri": "test://nope"})));
    }
}
