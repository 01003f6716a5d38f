//! Loading whole documents, one submodule per topic: `defaults`, `secrets`,
//! `errors`, `import`, `summary`, `oauth`, `fleet`, `telemetry` and
//! `access` (the gateway's callers and their rules). The
//! helpers they share are here.

mod access;
mod contracts;
mod defaults;
mod errors;
mod fleet;
mod import;
mod oauth;
mod on_behalf;
mod probes;
mod secrets;
mod summary;
mod telemetry;

use std::path::Path;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, Path::new("test.toml"), &no_env)
}

fn http(conn: &ConnectionConfig) -> &HttpTransport {
    match &conn.transport {
        Transport::Http(h) => h,
        Transport::Stdio(_) => panic!("expected http"),
    }
}

fn stdio(conn: &ConnectionConfig) -> &StdioTransport {
    match &conn.transport {
        Transport::Stdio(s) => s,
        Transport::Http(_) => panic!("expected stdio"),
    }
}

/// Loads `text` as `/etc/mcp/test.toml` with only `vars` in its environment.
fn load_with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Config::from_toml_str(text, Path::new("/etc/mcp/test.toml"), &move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}
