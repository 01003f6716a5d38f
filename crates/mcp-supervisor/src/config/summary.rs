//! The overview `mcp-supervisor check` prints after validating a file.
//!
//! What is shown is chosen so the output can be pasted into an issue: URLs without
//! userinfo or query, header *names* only, `auth=bearer` rather than a token, and
//! for stdio the command plus a count of arguments (arguments often carry
//! `--api-key …`, so they are not printed).

use std::fmt::Write as _;

use super::model::{
    CallerAuth, Choice, Config, ConnectionConfig, Transport, UpstreamProtocol, redact_url,
};

/// One line for the gateway, one for admin, then one per connection in name
/// order. Deterministic: the same config always gives the same text.
pub fn summary(config: &Config) -> String {
    let mut out = String::new();
    let g = &config.gateway;
    // `writeln!` into a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(
        out,
        "gateway  listen={} path={} expose={} prefix={} auth={} allowed_hosts={} max_body_bytes={} \
         max_connections={} max_sessions={}",
        g.listen,
        g.path,
        g.expose.as_str(),
        g.prefix.as_str(),
        match &g.auth {
            None => "none",
            Some(CallerAuth::Bearer(_)) => "bearer",
            Some(CallerAuth::OAuth(_)) => "oauth",
        },
        g.allowed_hosts.join(","),
        g.max_body_bytes,
        g.max_connections,
        g.max_sessions,
    );
    if !g.keys.is_empty() || !config.access.is_open() {
        let keys: Vec<&str> = g.keys.iter().map(|key| key.name.as_str()).collect();
        let _ = writeln!(
            out,
            "access   keys={} rules={}",
            if keys.is_empty() {
                "none".to_owned()
            } else {
                keys.join(",")
            },
            config.access.rules().len(),
        );
    }
    let a = &config.admin;
    let _ = writeln!(
        out,
        "admin    listen={} auth={} allowed_hosts={} max_connections={}",
        a.listen,
        if a.auth.is_some() { "bearer" } else { "none" },
        a.allowed_hosts.join(","),
        a.max_connections,
    );
    if let Some(t) = &config.telemetry {
        let headers: Vec<&str> = t.headers.iter().map(|(name, _)| name.as_str()).collect();
        let _ = writeln!(
            out,
            "telemetry endpoint={} protocol={} headers={} service_name={} sample_ratio={} \
             timeout={} batch_delay={} max_queue={} metrics_interval={} capture_content={}",
            redact_url(t.endpoint.as_str()),
            t.protocol.as_str(),
            headers.join(","),
            t.service_name,
            t.sample_ratio.get(),
            humantime::format_duration(t.timeout),
            humantime::format_duration(t.batch_delay),
            t.max_queue,
            humantime::format_duration(t.metrics_interval),
            t.capture_content,
        );
    }
    if let Some(f) = &config.fleet {
        let _ = writeln!(
            out,
            "fleet    redis={} password={} node={} namespace={} advertise={} max_clock_skew={}",
            f.redis,
            if f.password.is_some() { "set" } else { "none" },
            f.node,
            f.namespace,
            f.advertise
                .as_ref()
                .map_or_else(|| "none".to_owned(), ToString::to_string),
            humantime::format_duration(f.max_clock_skew),
        );
    }
    let _ = writeln!(out, "connections: {}", config.connections.len());
    let width = config
        .connections
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for conn in &config.connections {
        let _ = writeln!(out, "  {:<width$}  {}", conn.name, connection_line(conn));
    }
    out
}

fn connection_line(conn: &ConnectionConfig) -> String {
    let mut line = String::new();
    match &conn.transport {
        Transport::Http(http) => {
            let _ = write!(line, "http   url={}", redact_url(&http.url));
            if let Some(auth) = &http.auth {
                let _ = write!(line, " auth={}", auth.kind());
            }
            if !http.headers.is_empty() {
                let names: Vec<&str> = http.headers.iter().map(|(n, _)| n.as_str()).collect();
                let _ = write!(line, " headers={}", names.join(","));
            }
            if let Some(on_behalf) = &http.on_behalf {
                let _ = write!(line, " on_behalf={}", on_behalf.credentials.kind());
            }
        }
        Transport::Stdio(stdio) => {
            let _ = write!(
                line,
                "stdio  command={} args={}",
                stdio.command,
                stdio.args.len()
            );
            if !stdio.env.is_empty() {
                let names: Vec<&str> = stdio.env.iter().map(|(n, _)| n.as_str()).collect();
                let _ = write!(line, " env={}", names.join(","));
            }
            if let Some(cwd) = &stdio.cwd {
                let _ = write!(line, " cwd={}", cwd.display());
            }
        }
    }
    let tools = match &conn.allowed_tools {
        None => "all".to_owned(),
        Some(tools) if tools.is_empty() => "none".to_owned(),
        Some(tools) => tools.join(","),
    };
    let _ = write!(
        line,
        " tools={tools} concurrency={} queue={} retry={}",
        conn.max_concurrent_calls,
        conn.max_queued_calls,
        conn.retry_calls.as_str(),
    );
    if conn.protocol != UpstreamProtocol::Newest {
        let _ = write!(line, " protocol={}", conn.protocol.as_str());
    }
    line
}
