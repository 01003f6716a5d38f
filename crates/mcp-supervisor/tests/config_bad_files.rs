//! Every file in `tests/fixtures/config/bad/` must be refused with a message that
//! names the file, contains each of its `# expect: …` lines, and never contains
//! the canary token some of them plant.

use std::fs;
use std::path::{Path, PathBuf};

use mcp_supervisor::config::{Config, ConfigError};

const CANARY: &str = "CANARY-7f3a9c-SECRET";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/bad")
}

/// Only `CANARY_TOKEN` is defined, so `token_env` canaries resolve and any other
/// variable is missing.
fn env(name: &str) -> Option<String> {
    (name == "CANARY_TOKEN").then(|| CANARY.to_owned())
}

fn expectations(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# expect: "))
        .map(str::trim)
        .collect()
}

#[test]
fn every_bad_fixture_is_refused_with_file_key_and_problem() {
    let mut paths: Vec<PathBuf> = fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 17, "fixtures missing: found {}", paths.len());

    let mut failures = Vec::new();
    for path in &paths {
        let text = fs::read_to_string(path).unwrap();
        let expected = expectations(&text);
        assert!(
            !expected.is_empty(),
            "{} has no '# expect:' line",
            path.display()
        );
        let message = match Config::from_toml_str(&text, path, &env) {
            Ok(_) => {
                failures.push(format!("{}: accepted", path.display()));
                continue;
            }
            Err(err) => err.to_string(),
        };
        let file_name = path.file_name().unwrap().to_str().unwrap();
        // Visible with `--nocapture`: the messages are the product here.
        println!("{message}");
        if !message.starts_with(&path.display().to_string()) || !message.contains(file_name) {
            failures.push(format!("{file_name}: file not named first in: {message}"));
        }
        for want in expected {
            if !message.contains(want) {
                failures.push(format!("{file_name}: missing {want:?} in: {message}"));
            }
        }
        if message.contains(CANARY) || message.contains("7f3a9c") {
            failures.push(format!("{file_name}: canary leaked: {message}"));
        }
        if message.contains('\n') {
            failures.push(format!("{file_name}: multi-line message: {message}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unreadable_token_file_names_the_resolved_path() {
    let path = fixtures().join("unreadable_token_file.toml");
    let text = fs::read_to_string(&path).unwrap();
    match Config::from_toml_str(&text, &path, &env) {
        Err(ConfigError::TokenFile {
            path: token, key, ..
        }) => {
            assert_eq!(token, fixtures().join("no-such-token-file.txt"));
            assert_eq!(key, "connections.github.auth.token_file");
        }
        other => panic!("expected TokenFile, got {other:?}"),
    }
}

#[test]
fn missing_env_var_is_typed() {
    let path = fixtures().join("missing_env_var.toml");
    let text = fs::read_to_string(&path).unwrap();
    match Config::from_toml_str(&text, &path, &env) {
        Err(ConfigError::MissingEnv { var, .. }) => {
            assert_eq!(var, "MCP_SUPERVISOR_TEST_SURELY_UNSET");
        }
        other => panic!("expected MissingEnv, got {other:?}"),
    }
}

#[test]
fn from_file_reads_the_file_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.toml");
    fs::write(&path, "[supervisor]\ncall_timeout = \"0s\"\n").unwrap();
    let err = Config::from_file(&path).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: supervisor.call_timeout:", path.display())),
        "{err}"
    );

    let missing = dir.path().join("absent.toml");
    let err = Config::from_file(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&missing.display().to_string()),
        "{err}"
    );

    fs::write(
        &path,
        "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\n",
    )
    .unwrap();
    assert_eq!(Config::from_file(&path).unwrap().connections.len(), 1);
}
