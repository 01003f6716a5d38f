//! `mcp-supervisor contracts …` (docs/CONTRACTS.md):
//! - `lock --config F`: connect to every upstream and write the lock file
//!   from what each lists now (a connection that cannot be listed keeps
//!   what the lock had for it);
//! - `diff [NAME]`: what a running process sees that differs from the
//!   approved contracts, field by field;
//! - `approve NAME | NAME__TOOL | NAME --prompt P | NAME --template T`:
//!   approve a running process's current
//!   definitions (it updates the lock).

use std::path::Path;

use mcp_supervisor::{
    config::DEFAULT_LOCK_FILE,
    contracts::{Contract, ItemKind, Lock, approve_target},
};
use reqwest::Method;
use serde_json::Value;

use super::{
    admin_client::{AdminClient, block_on},
    oneshot::{list_all, load, with_registry},
};
use crate::{cli::AdminTarget, exit::Exit};

/// `contracts lock --config F`.
pub(crate) fn lock(config_path: &Path) -> Result<(), Exit> {
    let mut config = load(config_path)?;
    let path = match config.contracts.take() {
        Some(settings) => settings.lock,
        None => config_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(DEFAULT_LOCK_FILE),
    };
    let before = Lock::read(&path).map_err(|error| Exit::Failed(error.to_string()))?;
    let target = path.clone();
    with_registry(config, move |registry| async move {
        let (catalogs, failed) = list_all(&registry).await?;
        let mut lock = before.unwrap_or_default();
        for catalog in &catalogs {
            let approved = catalog
                .contracts
                .items
                .iter()
                .map(|seen| key_of(&seen.contract))
                .collect();
            lock.connections
                .insert(catalog.connection.clone(), approved);
        }
        lock.write(&target)
            .map_err(|error| Exit::Failed(error.to_string()))?;
        println!("wrote {}", target.display());
        if failed > 0 {
            return Err(Exit::Failed(format!(
                "{failed} connection(s) unavailable; the lock keeps what it had for them"
            )));
        }
        Ok(())
    })
}

fn key_of(contract: &Contract) -> ((ItemKind, String), Contract) {
    ((contract.kind, contract.name.clone()), contract.clone())
}

/// `contracts diff [NAME]`.
pub(crate) fn diff(connection: Option<&str>, target: AdminTarget) -> Result<(), Exit> {
    let client = AdminClient::new(target)?;
    let answer = block_on(client.request(Method::GET, &["contracts"]))??;
    if !answer.status.is_success() {
        return Err(Exit::Failed(answer.error_message()));
    }
    let empty = Vec::new();
    let connections = answer.body["connections"].as_array().unwrap_or(&empty);
    if let Some(name) = connection
        && !connections.iter().any(|c| c["name"] == name)
    {
        return Err(Exit::Failed(format!("unknown MCP connection '{name}'")));
    }
    let mut differences = 0;
    for listed in connections {
        let name = listed["name"].as_str().unwrap_or_default();
        if connection.is_some_and(|wanted| wanted != name) {
            continue;
        }
        let items = listed["contracts"]["items"].as_array().unwrap_or(&empty);
        for item in items.iter().filter(|item| item["verdict"] != "approved") {
            differences += 1;
            print!("{}", describe(name, item));
        }
    }
    if differences == 0 {
        println!("no differences from the approved contracts");
    }
    Ok(())
}

/// One item's difference, field by field.
fn describe(connection: &str, item: &Value) -> String {
    let (kind, name) = (
        item["kind"].as_str().unwrap_or_default(),
        item["name"].as_str().unwrap_or_default(),
    );
    let mut text = format!(
        "{connection}  {kind} {name}  {}  sha256 {}\n",
        item["verdict"].as_str().unwrap_or_default(),
        item["sha256"].as_str().unwrap_or_default(),
    );
    if let Some(kind) = ItemKind::named(kind) {
        text.push_str(&format!(
            "  approve: mcp-supervisor contracts approve {} --sha256 {}\n",
            approve_target(connection, kind, name),
            item["sha256"].as_str().unwrap_or_default()
        ));
    }
    let Some(fields) = item["changed"].as_array() else {
        text.push_str("  (nothing approved yet)\n");
        return text;
    };
    let dangers: Vec<&str> = item["dangers"]
        .as_array()
        .map(|dangers| dangers.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for field in fields.iter().filter_map(Value::as_str) {
        if field == "annotations" && !dangers.is_empty() {
            text.push_str(&format!("  {field} ({}):\n", dangers.join(", ")));
        } else {
            text.push_str(&format!("  {field}:\n"));
        }
        text.push_str(&format!(
            "    - {}\n",
            shown(&item["approved_contract"][field])
        ));
        text.push_str(&format!("    + {}\n", shown(&item["contract"][field])));
    }
    text
}

/// A field's value on one line: text as it is, the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "(absent)".to_owned(),
        Value::String(text) => text.replace('\n', "\\n"),
        other => other.to_string(),
    }
}

/// `contracts approve NAME | NAME__TOOL | NAME --prompt P | NAME --template T
/// [--sha256 HASH]`.
pub(crate) fn approve(
    what: &str,
    item: Option<(ItemKind, String)>,
    sha256: Option<&str>,
    target: AdminTarget,
) -> Result<(), Exit> {
    let segments: Vec<&str> = match (what.split_once("__"), &item) {
        (Some(_), Some(_)) => {
            return Err(Exit::Usage(
                "--prompt and --template name an item of a connection: give NAME, not NAME__TOOL"
                    .to_owned(),
            ));
        }
        (Some((connection, tool)), None) => {
            vec!["connections", connection, "tools", tool, "approve"]
        }
        (None, Some((kind, name))) => vec!["connections", what, kind.segment(), name, "approve"],
        (None, None) if sha256.is_some() => {
            return Err(Exit::Usage(
                "--sha256 needs one item: NAME__TOOL, --prompt or --template".to_owned(),
            ));
        }
        (None, None) => vec!["connections", what, "approve"],
    };
    let body = serde_json::json!({ "sha256": sha256 }).to_string();
    let client = AdminClient::new(target)?;
    let answer = block_on(client.request_with(Method::POST, &segments, &body))??;
    if !answer.status.is_success() {
        return Err(Exit::Failed(answer.error_message()));
    }
    let approved = answer.body["approved"].as_u64().unwrap_or(0);
    println!("approved {approved} contract(s) of {what}");
    Ok(())
}
