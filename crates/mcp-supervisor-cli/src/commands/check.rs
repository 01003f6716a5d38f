//! `mcp-supervisor check --config FILE [--connect]`: validate and summarize;
//! with `--connect`, also connect to every upstream, list what it offers, and
//! check that the names the gateway would expose do not clash.

use std::path::Path;

use mcp_supervisor::{
    access::{Item, Rules},
    config::summary,
    gateway::{directory::Directory, naming::Naming},
};

use super::oneshot::{connect_all, load, with_registry};
use crate::exit::Exit;

pub(crate) fn run(path: &Path, connect: bool) -> Result<(), Exit> {
    let config = load(path)?;
    println!("{}: ok", path.display());
    for warning in &config.warnings {
        println!("warning: {warning}");
    }
    print!("{}", summary(&config));
    if !connect {
        return Ok(());
    }
    println!("connecting:");
    let naming = Naming::new(config.gateway.prefix, config.connections.len());
    let file = path.display().to_string();
    let access = config.access.clone();
    with_registry(config, move |registry| async move {
        let catalogs = connect_all(&registry).await?;
        let directory = Directory::build(naming, &catalogs);
        for warning in unmatched(&access, &directory) {
            println!("warning: {file}: {warning}");
        }
        let clashes = directory.clashes;
        if clashes.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = clashes.iter().map(ToString::to_string).collect();
        Err(Exit::Usage(format!(
            "{file}: gateway.prefix: names must be unique without a prefix, but {}",
            listed.join("; ")
        )))
    })
}

/// The rules' globs that match nothing the upstreams offer, as exposed in
/// `directory`: each a line naming the rule and the glob.
fn unmatched(access: &Rules, directory: &Directory) -> Vec<String> {
    fn connection_of(target: Option<&mcp_supervisor::gateway::directory::Target>) -> &str {
        target.map_or("", |target| target.connection.as_str())
    }
    let mut items: Vec<Item<'_>> = Vec::new();
    for tool in directory.tools() {
        items.push(Item::tool(
            connection_of(directory.tool(&tool.name)),
            &tool.name,
        ));
    }
    for prompt in directory.prompts() {
        items.push(Item::prompt(
            connection_of(directory.prompt(&prompt.name)),
            &prompt.name,
        ));
    }
    let resources: Vec<(String, &str)> = directory
        .resources()
        .map(|resource| {
            let connection = directory
                .resource(&resource.uri)
                .map(|target| target.connection);
            (connection.unwrap_or_default(), resource.uri.as_str())
        })
        .chain(directory.templates().map(|template| {
            (
                connection_of(directory.template(&template.uri_template)).to_owned(),
                template.uri_template.as_str(),
            )
        }))
        .collect();
    for (connection, uri) in &resources {
        items.push(Item::resource(connection, uri));
    }
    access
        .unmatched(&items)
        .into_iter()
        .map(|(index, pattern)| {
            format!(
                "access[{index}]: {}:{} matches nothing the connections offer",
                pattern.kind.as_str(),
                pattern.glob()
            )
        })
        .collect()
}
