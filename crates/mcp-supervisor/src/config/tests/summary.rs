//! `summary`: the one-screen overview `mcp-supervisor check` prints.

use std::path::Path;

use super::*;

#[test]
fn summary_lists_everything_in_order() {
    let env = |_: &str| Some("t".to_owned());
    let config = Config::from_toml_str(
        r#"
        [gateway]
        auth = { kind = "bearer", token_env = "T" }
        [connections.web]
        transport = "http"
        url = "https://user-less.example/mcp?key=v"
        auth = { kind = "bearer", token_env = "T" }
        headers = { X-A = "1", X-B = "2" }
        allowed_tools = ["a", "b"]
        [connections.cli]
        transport = "stdio"
        command = "srv"
        args = ["--key", "v"]
        env = { K = "v" }
        cwd = "/tmp"
        allowed_tools = []
        max_concurrent_calls = 1
        protocol = "2026-07-28"
        "#,
        Path::new("x.toml"),
        &env,
    )
    .unwrap();
    let expected = "\
gateway  listen=127.0.0.1:7300 path=/mcp expose=namespaced prefix=always auth=bearer allowed_hosts=localhost,127.0.0.1,[::1] max_body_bytes=4194304 max_connections=512 max_sessions=256
admin    listen=127.0.0.1:7301 auth=none allowed_hosts=localhost,127.0.0.1,[::1] max_connections=32
connections: 2
  cli  stdio  command=srv args=2 env=K cwd=/tmp tools=none concurrency=1 queue=64 retry=safe protocol=2026-07-28
  web  http   url=https://user-less.example/mcp?[REDACTED] auth=bearer headers=X-A,X-B tools=a,b concurrency=4 queue=64 retry=safe
";
    assert_eq!(summary(&config), expected);
}
