//! The skills extension (SEP-2640): one skill, served as resources.
//!
//! A skill is a directory of files: `SKILL.md` (YAML frontmatter, then
//! instructions) and whatever it references. `skills/list` and
//! `skills/get` describe it — frontmatter plus the digest and size of
//! every file — and the files themselves are plain resources, readable
//! with `resources/read` and browsable with `resources/directory/read`.
//! The one skill here has a subdirectory so that browsing has somewhere
//! to descend.

use rmcp::{
    ErrorData,
    model::{
        DIRECTORY_MIME_TYPE, GetSkillResult, ListResourcesResult, ListSkillsResult, Resource,
        ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
    },
};
use serde_json::json;

/// The skill's directory; its name is the last segment.
const ROOT: &str = "skill://conformance/greeting";
const NAME: &str = "greeting";
const DESCRIPTION: &str = "Greets the user in the house style; use when a conversation starts.";
const SKILL_MD_URI: &str = "skill://conformance/greeting/SKILL.md";
const REFERENCES_URI: &str = "skill://conformance/greeting/references";
const STYLE_URI: &str = "skill://conformance/greeting/references/style.md";

/// The frontmatter must match [`NAME`] and [`DESCRIPTION`] exactly: the
/// suite compares it with the entry `skills/list` returns.
const SKILL_MD: &str = "---
name: greeting
description: Greets the user in the house style; use when a conversation starts.
---

# Greeting

Say hello by name, then offer help. Read `references/style.md` for the
house style before the first greeting.
";

const STYLE_MD: &str = "# House style

Warm, brief, no exclamation marks.
";

fn skill() -> Skill {
    Skill::new(
        SKILL_MD_URI,
        SkillFrontmatter::new(NAME, DESCRIPTION),
        SkillResources::Files(vec![
            SkillResource::from_bytes(SKILL_MD_URI, SKILL_MD.as_bytes()),
            SkillResource::from_bytes(STYLE_URI, STYLE_MD.as_bytes()),
        ]),
    )
}

/// The skill's files, as `resources/list` shows them (SEP-2640 wants the
/// SKILL.md resource named and described after its frontmatter).
pub(crate) fn resources() -> Vec<Resource> {
    vec![
        Resource::new(SKILL_MD_URI, NAME)
            .with_description(DESCRIPTION)
            .with_mime_type("text/markdown"),
        Resource::new(STYLE_URI, "greeting-style")
            .with_description("House style of the greeting skill")
            .with_mime_type("text/markdown"),
    ]
}

/// `resources/read` of a skill file, `None` for any other URI.
pub(crate) fn read(uri: &str) -> Option<ResourceContents> {
    let text = match uri {
        SKILL_MD_URI => SKILL_MD,
        STYLE_URI => STYLE_MD,
        _ => return None,
    };
    Some(ResourceContents::text(text, uri).with_mime_type("text/markdown"))
}

pub(crate) fn list() -> ListSkillsResult {
    ListSkillsResult::with_all_items(vec![skill()])
}

/// # Errors
///
/// `-32602` for a URI that is not this server's skill.
pub(crate) fn get(uri: &str) -> Result<GetSkillResult, ErrorData> {
    if uri == SKILL_MD_URI {
        Ok(GetSkillResult::new(skill()))
    } else {
        Err(ErrorData::invalid_params(
            format!("no skill at {uri}"),
            Some(json!({"uri": uri})),
        ))
    }
}

/// `resources/directory/read`: the direct children of a skill directory.
///
/// # Errors
///
/// `-32602` for anything that is not one of its directories.
pub(crate) fn read_directory(uri: &str) -> Result<ListResourcesResult, ErrorData> {
    let children = match uri.trim_end_matches('/') {
        ROOT => vec![
            Resource::new(SKILL_MD_URI, NAME)
                .with_description(DESCRIPTION)
                .with_mime_type("text/markdown"),
            Resource::new(REFERENCES_URI, "references").with_mime_type(DIRECTORY_MIME_TYPE),
        ],
        REFERENCES_URI => {
            vec![Resource::new(STYLE_URI, "style.md").with_mime_type("text/markdown")]
        }
        _ => {
            return Err(ErrorData::invalid_params(
                format!("{uri} is not a directory"),
                Some(json!({"uri": uri})),
            ));
        }
    };
    Ok(ListResourcesResult::with_all_items(children))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_passes_rmcp_validation() {
        skill().validate().unwrap();
    }

    #[test]
    fn the_file_frontmatter_is_the_listed_one() {
        assert!(SKILL_MD.starts_with(&format!(
            "---\nname: {NAME}\ndescription: {DESCRIPTION}\n---\n"
        )));
    }

    #[test]
    fn directories_and_files() {
        assert_eq!(read_directory(ROOT).unwrap().resources.len(), 2);
        assert!(read_directory(SKILL_MD_URI).is_err());
        assert!(read(STYLE_URI).is_some() && read(ROOT).is_none());
    }
}
