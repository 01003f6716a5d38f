//! Opening a URL for a person: `$BROWSER`, when set.

use std::process::Stdio;

/// With `$BROWSER` set, runs it with `url` as its last argument (as many
/// command-line tools do, so a script can follow the link too); says so if
/// it cannot. Without it, does nothing: the caller has printed the URL.
pub(crate) fn open(url: &str) {
    let Some(browser) = std::env::var_os("BROWSER").filter(|value| !value.is_empty()) else {
        return;
    };
    let started = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"eval "$0 \"\$1\"""#)
        .arg(&browser)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn();
    if let Err(error) = started {
        eprintln!("(could not run $BROWSER: {error})");
    }
}
