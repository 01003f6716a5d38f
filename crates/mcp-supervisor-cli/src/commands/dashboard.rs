//! `mcp-supervisor dashboard [--admin HOST:PORT | --config FILE] [--open]`:
//! the link that opens a running process's dashboard in a browser
//! (docs/DASHBOARD.md). With `[admin] auth`, a one-time login link: it
//! works once, for 5 minutes, and sets the browser's session.

use reqwest::Method;

use super::{
    admin_client::{AdminClient, block_on},
    browser,
};
use crate::{cli::AdminTarget, exit::Exit};

pub(crate) fn run(target: AdminTarget, open: bool) -> Result<(), Exit> {
    let client = AdminClient::new(target)?;
    let answer = block_on(client.request(Method::POST, &["dashboard", "login-links"]))??;
    if answer.status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(Exit::Failed(
            "the admin API needs its token: pass --config FILE, the file with its [admin] auth"
                .to_owned(),
        ));
    }
    if !answer.status.is_success() {
        return Err(Exit::Failed(answer.error_message()));
    }
    let Some(path) = answer.body["path"].as_str() else {
        return Err(Exit::Failed(
            "the admin API sent no dashboard link (is it an older mcp-supervisor?)".to_owned(),
        ));
    };
    let url = format!("{}{path}", client.base().as_str().trim_end_matches('/'));
    match answer.body["expires_in_s"].as_u64() {
        Some(seconds) => println!(
            "Open the dashboard (single use, expires in {} min):\n\n  {url}\n",
            seconds.div_ceil(60)
        ),
        None => println!("Open the dashboard:\n\n  {url}\n"),
    }
    if open {
        browser::open(&url);
    }
    Ok(())
}
