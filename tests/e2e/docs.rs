//! The examples of README.md and docs/*.md, run as they are written (issue
//! 33: the README's Python example drifted from the SDK and nothing noticed).
//! Every example is read from its Markdown file (`e2e::markdown`), so no copy
//! of one lives here; what a block shows it prints is compared with what
//! really prints.
//!
//! - README, "Quick start": `serve` on the default config prints the
//!   README's "listening" lines; the README's Python client, run by each
//!   pinned SDK (`mcp` 1.30.0 and 2.3.0), prints what its comments say; the
//!   README's `$` commands (`status`, `reset demo`, `kill -HUP <pid>`) print
//!   what the README shows under them, column by column, and do what their
//!   comments say; SIGTERM then ends the process with exit 0.
//! - README, "A server that needs OAuth": the config in the block's comments
//!   passes `check`; pointed at `mcp-test-server --oauth`, the block's
//!   `login` (with `$BROWSER` doing the browser's part) stores the tokens
//!   where the README says, and its `serve` calls with them.
//! - Every `toml` block of README.md and docs/*.md is a config `check`
//!   accepts, checked as its `<!-- docs-test: … -->` marker says
//!   ([`TomlCheck`]); the `import` example prints exactly what the docs show.
//!
//! The README's Rust examples are doc tests (crates/mcp-supervisor/src/lib.rs).
//!
//! The README shows the default config's addresses (127.0.0.1:7300 and
//! :7301). These tests serve that same config on free ports and put the
//! ports they got into the README's text, so that they run beside other
//! tests and beside a supervisor someone runs on the defaults
//! (docs/DECISIONS.md #87); `scripts/smoke-make-run.sh` sees `make run` on
//! the defaults themselves.

use std::{fs, os::unix::fs::PermissionsExt, process::Command, time::Duration};

use e2e::{
    BROWSER, HttpUpstream, PythonSdk, Served, gateway_call_text,
    markdown::{self, CodeBlock},
    repo_root, run_bounded, supervisor, supervisor_command, toml_string, wait_until,
};
use serde_json::json;

const README: &str = "README.md";

/// How long a client run or a login may take; each bounds its own requests,
/// so this only stops a hang.
const RUN_BOUND: Duration = Duration::from_secs(120);

/// `shutdown_timeout`'s default (10 s) and a margin for a slow machine.
const STOP_BOUND: Duration = Duration::from_secs(30);

/// `config/default.toml`, which `serve` embeds and uses without `--config`.
struct DefaultConfig {
    text: String,
    /// `gateway.listen`, e.g. `127.0.0.1:7300`.
    gateway: String,
    /// `admin.listen`.
    admin: String,
}

impl DefaultConfig {
    fn read() -> Self {
        let text = fs::read_to_string(repo_root().join("config/default.toml")).unwrap();
        let table: toml::Table = text.parse().expect("config/default.toml is TOML");
        let listen = |section: &str| {
            table[section]["listen"]
                .as_str()
                .unwrap_or_else(|| panic!("config/default.toml sets no {section}.listen"))
                .to_owned()
        };
        DefaultConfig {
            gateway: listen("gateway"),
            admin: listen("admin"),
            text,
        }
    }

    /// The same config with both servers on free ports.
    fn on_free_ports(&self) -> String {
        let mut text = self.text.clone();
        for address in [&self.gateway, &self.admin] {
            let quoted = toml_string(address);
            assert_eq!(text.matches(&quoted).count(), 1, "{quoted} in {text}");
            text = text.replace(&quoted, "\"127.0.0.1:0\"");
        }
        text
    }

    /// `text` (from the README) with the default addresses replaced by those
    /// `served` listens on.
    fn localized(&self, text: &str, served: &Served) -> String {
        text.replace(&self.gateway, served.gateway_address())
            .replace(&self.admin, served.admin_address())
    }
}

/// The only block of `lang` in `section` of the README.
fn readme_block(section: &str, lang: &str) -> CodeBlock {
    let blocks = markdown::section_blocks(README, section, lang);
    let [block] = blocks.as_slice() else {
        panic!(
            "README.md, {section:?}: expected one `{lang}` block, found {}",
            blocks.len()
        );
    };
    block.clone()
}

/// What the Python `block` says it prints: for each `print(` line, the
/// comment lines right under it, joined (a long value wraps over several).
fn printed_by(block: &CodeBlock) -> Vec<String> {
    let lines: Vec<&str> = block.text.lines().collect();
    let mut printed = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if !line.trim_start().starts_with("print(") {
            continue;
        }
        let shown: Vec<&str> = lines[index + 1..]
            .iter()
            .map_while(|next| next.trim_start().strip_prefix('#'))
            .map(str::trim)
            .collect();
        assert!(
            !shown.is_empty(),
            "{}: `{}` has no `# …` line under it saying what it prints",
            block.place(),
            line.trim()
        );
        printed.push(shown.join(" "));
    }
    printed
}

/// A shown command line's words, without its `# comment`. The README's
/// commands need no shell quoting, and so this takes none: a command that
/// does fails here, to be taught.
fn shell_words(line: &str) -> Vec<&str> {
    let command = line.split(" #").next().unwrap_or(line);
    assert!(
        !command.contains(['\'', '"', '$', '|', ';', '&']),
        "`{line}` needs a shell; tests/e2e/docs.rs runs commands word by word"
    );
    command.split_whitespace().collect()
}

/// The lines of a table as compared: runs of spaces made one (the README
/// lines a table up by hand, the CLI by its widest cell), blank lines out.
fn columns<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    lines
        .into_iter()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect()
}

/// A terminal session (`$ COMMAND` lines, each followed by what it prints)
/// as (command, printed lines) pairs.
fn session(block: &CodeBlock) -> Vec<(&str, Vec<&str>)> {
    let mut steps: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in block.text.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push((command, Vec::new()));
        } else {
            let Some((_, printed)) = steps.last_mut() else {
                panic!("{}: output before any `$ ` command", block.place());
            };
            printed.push(line);
        }
    }
    assert!(
        !steps.is_empty(),
        "{}: a terminal session without a `$ ` command",
        block.place()
    );
    steps
}

/// The README's Quick start, with the client run by `sdk`: see the module
/// doc.
fn quick_start(sdk: PythonSdk) {
    let texts = markdown::section_blocks(README, "Quick start", "text");
    let [listening, terminal] = texts.as_slice() else {
        panic!(
            "README.md, Quick start: expected two `text` blocks (what `make run` prints, \
             then a terminal session), found {}",
            texts.len()
        );
    };
    let python = readme_block("Quick start", "python");
    let default = DefaultConfig::read();
    assert!(
        python
            .text
            .contains(&format!("http://{}/", default.gateway)),
        "{}: the client does not connect to the default config's gateway ({})",
        python.place(),
        default.gateway
    );
    let mut served = Served::start(&default.on_free_ports());

    assert_eq!(
        served.listening,
        default
            .localized(&listening.text, &served)
            .lines()
            .collect::<Vec<_>>(),
        "{}: `serve` on the default config prints other lines",
        listening.place()
    );

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("client.py");
    fs::write(&script, default.localized(&python.text, &served)).unwrap();
    let run = run_bounded(Command::new(sdk.python()).arg(&script), RUN_BOUND);
    assert_eq!(
        run.code,
        Some(0),
        "{}: the README's Python client fails with {sdk:?}: {run:?}\nsupervisor:\n{}",
        python.place(),
        served.stderr()
    );
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        printed_by(&python),
        "{}: with {sdk:?} the client prints (left) other than its comments say (right)",
        python.place()
    );

    for (command, shown) in session(terminal) {
        match shell_words(command).as_slice() {
            ["mcp-supervisor", args @ ..] => {
                // Without an address these commands ask the default
                // config's admin API, which listens elsewhere here.
                let mut args = args.to_vec();
                args.extend(["--admin", served.admin_address()]);
                let run = supervisor(&args, &[]);
                assert_eq!(
                    run.code,
                    Some(0),
                    "{}: `{command}`: {run:?}",
                    terminal.place()
                );
                assert_eq!(
                    columns(run.stdout.lines()),
                    columns(shown),
                    "{}: `{command}` prints (left) other than the README shows (right)",
                    terminal.place()
                );
            }
            ["kill", "-HUP", "<pid>"] => {
                assert!(
                    shown.is_empty(),
                    "{}: kill prints nothing",
                    terminal.place()
                );
                served.signal("HUP");
                assert!(
                    wait_until(RUN_BOUND, || served.stderr().contains("config reloaded")),
                    "{}: SIGHUP did not reload the config:\n{}",
                    terminal.place(),
                    served.stderr()
                );
            }
            _ => panic!(
                "{}: the README runs `{command}`, which tests/e2e/docs.rs does not know how \
                 to run: teach it",
                terminal.place()
            ),
        }
    }
    assert_eq!(
        served.terminate(STOP_BOUND),
        Some(0),
        "SIGTERM: {}",
        served.stderr()
    );
}

#[test]
fn readme_quick_start_runs_as_shown_with_the_python_sdk_1() {
    quick_start(PythonSdk::V1);
}

#[test]
fn readme_quick_start_runs_as_shown_with_the_python_sdk_2() {
    quick_start(PythonSdk::V2);
}

#[test]
fn readme_oauth_commands_check_log_in_and_serve() {
    const SECTION: &str = "A server that needs OAuth";
    let block = readme_block(SECTION, "sh");
    // The config is the block's indented comment lines (`#    key = …`).
    let config: String = block
        .text
        .lines()
        .filter_map(|line| line.strip_prefix('#'))
        .filter(|rest| rest.starts_with("  "))
        .map(|rest| format!("{}\n", rest.trim_start()))
        .collect();
    let commands: Vec<Vec<&str>> = block
        .text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(shell_words)
        .collect();
    let config_names: Vec<&str> = commands
        .iter()
        .filter_map(|words| {
            let at = words.iter().position(|word| *word == "--config")?;
            words.get(at + 1).copied()
        })
        .collect();
    let [name, ..] = config_names.as_slice() else {
        panic!("{}: no command takes --config", block.place());
    };
    assert!(
        config_names.iter().all(|other| other == name),
        "{}: {config_names:?}",
        block.place()
    );

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir(&home).unwrap();
    let config_path = dir.path().join(name);
    // Each command runs in the config's directory, with `~` a fresh home
    // and no XDG_STATE_HOME (the README says where tokens go without one).
    let command = |words: &[&str]| {
        let mut command = supervisor_command(words);
        command
            .current_dir(dir.path())
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME")
            .env("BROWSER", BROWSER)
            .env("RUST_LOG", "info");
        command
    };

    // As shown, it is a valid config.
    fs::write(&config_path, &config).unwrap();
    let check = run_bounded(&mut command(&["check", "--config", name]), RUN_BOUND);
    assert_eq!(check.code, Some(0), "{}: {check:?}", block.place());

    // Then the same, pointed at an OAuth-protected server, with both of
    // `serve`'s servers on free ports.
    let upstream = HttpUpstream::start_with(&["--oauth"]);
    let urls: Vec<&str> = config
        .lines()
        .filter(|line| line.starts_with("url = "))
        .collect();
    let [url_line] = urls.as_slice() else {
        panic!("{}: expected one url in {config}", block.place());
    };
    fs::write(
        &config_path,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n{}",
            config.replace(url_line, &format!("url = {}", toml_string(&upstream.url)))
        ),
    )
    .unwrap();
    let mut served = None;
    for words in &commands {
        match words.as_slice() {
            ["mcp-supervisor", "login", ..] => {
                let login = run_bounded(&mut command(&words[1..]), RUN_BOUND);
                assert_eq!(login.code, Some(0), "{}: {login:?}", block.place());
                assert!(
                    login.all_output().contains("/authorize?"),
                    "login prints the URL to open: {login:?}"
                );
            }
            ["mcp-supervisor", "serve", ..] => {
                served = Some(Served::spawn(
                    command(&words[1..]),
                    tempfile::tempdir().unwrap(),
                    config_path.clone(),
                ));
            }
            _ => panic!(
                "{}: the README runs `{}`, which tests/e2e/docs.rs does not know how to \
                 run: teach it",
                block.place(),
                words.join(" ")
            ),
        }
    }

    // The tokens are where the README says, as it says.
    let prose = markdown::section_text(README, SECTION);
    let stored = prose
        .split('`')
        .find(|quoted| quoted.starts_with("~/"))
        .unwrap_or_else(|| panic!("README.md, {SECTION}: no `~/…` path of the tokens"));
    let stored = home.join(&stored[2..]);
    let mode = fs::metadata(&stored)
        .unwrap_or_else(|error| panic!("{}: {error}", stored.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", stored.display());

    // `serve` uses them.
    let served = served.unwrap_or_else(|| panic!("{}: no `serve`", block.place()));
    let answer = gateway_call_text(&served.gateway_url, "docs__echo", json!({"text": "hi"}));
    assert_eq!(answer, "hi", "supervisor:\n{}", served.stderr());
    let status = supervisor(&["status", "--admin", served.admin_address()], &[]);
    let row = status
        .stdout
        .lines()
        .find(|line| line.starts_with("docs "))
        .unwrap_or_else(|| panic!("no docs row: {status:?}"));
    assert!(
        row.contains(" ready ") && row.contains("token until"),
        "{row}"
    );
}

/// How a `toml` block of README.md or docs/*.md is checked, by its
/// `<!-- docs-test: … -->` marker (on the line just above the fence).
#[derive(Debug, Clone, PartialEq, Eq)]
enum TomlCheck {
    /// No marker: a whole config file, which `check` accepts.
    File,
    /// `each-line-in-an-http-connection`: each line is one way to write a
    /// key of an http connection (the `auth = …` alternatives); `check`
    /// accepts each, alone, in an otherwise minimal connection.
    EachLineInAnHttpConnection,
    /// `import-output`: exactly what `mcp-supervisor import` prints for the
    /// `json` block just above it; and a file `check` accepts.
    ImportOutput,
    /// `skip: REASON`: a deliberate fragment that cannot be checked; the
    /// reason is required, and printed.
    Skip(String),
}

impl TomlCheck {
    fn of(block: &CodeBlock) -> Self {
        match block.marker.as_deref() {
            None => TomlCheck::File,
            Some("each-line-in-an-http-connection") => TomlCheck::EachLineInAnHttpConnection,
            Some("import-output") => TomlCheck::ImportOutput,
            Some(marker) => match marker.strip_prefix("skip:").map(str::trim) {
                Some(reason) if !reason.is_empty() => TomlCheck::Skip(reason.to_owned()),
                _ => panic!(
                    "{}: unknown docs-test marker {marker:?} (each-line-in-an-http-connection, \
                     import-output, skip: REASON)",
                    block.place()
                ),
            },
        }
    }
}

/// A fleet key for examples: 32 bytes in base64.
const EXAMPLE_FLEET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Runs `mcp-supervisor check` on `text` as a config file, with every
/// variable it reads set and every token file it names written (examples
/// name them; their values do not matter to `check`).
fn assert_checks(text: &str, place: &str) {
    let dir = tempfile::tempdir().unwrap();
    let table: toml::Table = text
        .parse()
        .unwrap_or_else(|error| panic!("{place}: not TOML: {error}\n{text}"));
    let mut command = supervisor_command(&["check", "--config", "example.toml"]);
    command.current_dir(dir.path());
    let mut tables = vec![&table];
    while let Some(table) = tables.pop() {
        for (key, value) in table {
            match (key.as_str(), value) {
                (_, toml::Value::Table(inner)) => tables.push(inner),
                // `credentials = [{ …, token_env = "NAME" }]`.
                (_, toml::Value::Array(items)) => {
                    tables.extend(items.iter().filter_map(toml::Value::as_table));
                }
                // `env = "NAME"`: a `[telemetry]` header's value.
                (
                    "token_env" | "client_secret_env" | "password_env" | "env",
                    toml::Value::String(name),
                ) => {
                    command.env(name, format!("example-secret-of-{name}"));
                }
                // The fleet's key must be 32 bytes in base64.
                ("key_env", toml::Value::String(name)) => {
                    command.env(name, EXAMPLE_FLEET_KEY);
                }
                (
                    "token_file" | "password_file" | "key_file" | "file",
                    toml::Value::String(path),
                ) => {
                    let content = if key == "key_file" {
                        EXAMPLE_FLEET_KEY
                    } else {
                        "example-token"
                    };
                    let path = dir.path().join(path);
                    fs::create_dir_all(path.parent().unwrap()).unwrap();
                    fs::write(path, format!("{content}\n")).unwrap();
                }
                _ => {}
            }
        }
    }
    fs::write(dir.path().join("example.toml"), text).unwrap();
    let check = run_bounded(&mut command, RUN_BOUND);
    assert_eq!(
        check.code,
        Some(0),
        "{place}: `mcp-supervisor check` refuses the example:\n{text}\n{check:?}"
    );
}

/// `mcp-supervisor import` of the `json` block `input`.
fn imported(input: &CodeBlock) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("servers.json");
    fs::write(&file, &input.text).unwrap();
    let run = supervisor(&["import", file.to_str().unwrap()], &[]);
    assert_eq!(run.code, Some(0), "{}: {run:?}", input.place());
    run.stdout
}

/// The lines (1-based) of `relative` that open a `toml` code block or hold
/// a `docs-test` marker, read from the raw text with no help from
/// `e2e::markdown`: a fence indented (in a list), written with `~~~`, or
/// whose info string says `TOML` counts too, so a block the parser does not
/// see is noticed rather than skipped.
fn toml_fences_and_markers(relative: &str) -> (Vec<usize>, Vec<usize>) {
    let text = fs::read_to_string(repo_root().join(relative)).unwrap();
    let (mut fences, mut markers) = (Vec::new(), Vec::new());
    let mut open: Option<&str> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = ["```", "~~~"]
            .into_iter()
            .find(|fence| trimmed.starts_with(fence));
        match (open, fence) {
            (Some(opened), Some(fence)) if fence == opened => open = None,
            (Some(_), _) => {}
            (None, Some(fence)) => {
                open = Some(fence);
                let info = trimmed.trim_start_matches(fence.as_bytes()[0] as char);
                let lang = info.split_whitespace().next().unwrap_or("");
                if lang.eq_ignore_ascii_case("toml") {
                    fences.push(index + 1);
                }
            }
            (None, None) if trimmed.starts_with("<!-- docs-test:") => markers.push(index + 1),
            (None, None) => {}
        }
    }
    (fences, markers)
}

#[test]
fn every_toml_example_of_the_readme_and_docs_is_a_config_check_accepts() {
    let mut checked = 0;
    for file in std::iter::once(README.to_owned()).chain(markdown::docs_files()) {
        let blocks = markdown::code_blocks(&file);
        // Every `toml` fence of the file is a block taken below (checked or
        // skipped with its reason), and every marker is that of one.
        let (fences, markers) = toml_fences_and_markers(&file);
        let taken: Vec<usize> = blocks
            .iter()
            .filter(|block| block.lang == "toml")
            .map(|block| block.line)
            .collect();
        assert_eq!(
            taken, fences,
            "{file}: the `toml` blocks checked (left, by line) are not every `toml` fence \
             of the file (right); write each at the start of a line as ```toml"
        );
        let marked: Vec<usize> = blocks
            .iter()
            .filter(|block| block.lang == "toml" && block.marker.is_some())
            .map(|block| block.line - 1)
            .collect();
        assert_eq!(
            marked, markers,
            "{file}: the docs-test markers taken (left, by line) are not every marker of \
             the file (right); a marker goes on the line just above a ```toml fence"
        );
        for (index, block) in blocks.iter().enumerate() {
            if block.lang != "toml" {
                continue;
            }
            let place = block.place();
            match TomlCheck::of(block) {
                TomlCheck::File => assert_checks(&block.text, &place),
                TomlCheck::EachLineInAnHttpConnection => {
                    for line in block.text.lines().filter(|line| !line.trim().is_empty()) {
                        assert_checks(
                            &format!(
                                "[connections.example]\ntransport = \"http\"\n\
                                 url = \"https://example.invalid/mcp\"\n{line}\n"
                            ),
                            &place,
                        );
                    }
                }
                TomlCheck::ImportOutput => {
                    let input = index
                        .checked_sub(1)
                        .map(|before| &blocks[before])
                        .filter(|before| before.lang == "json")
                        .unwrap_or_else(|| panic!("{place}: no `json` block just above"));
                    assert_eq!(
                        imported(input),
                        block.text,
                        "{place}: `mcp-supervisor import` prints (left) other than the docs \
                         show (right)"
                    );
                    assert_checks(&block.text, &place);
                }
                TomlCheck::Skip(reason) => {
                    eprintln!("{place}: not checked: {reason}");
                    continue;
                }
            }
            checked += 1;
        }
    }
    // The docs hold TOML examples (docs/CONFIG.md): none found means the
    // blocks are no longer recognised, not that all is well.
    assert!(
        checked > 0,
        "no `toml` block found in README.md or docs/*.md"
    );
}
