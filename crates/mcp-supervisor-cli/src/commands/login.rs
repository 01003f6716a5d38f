//! `login NAME` and `logout NAME`: an OAuth connection's tokens
//! (docs/OAUTH.md).

use std::{path::Path, time::Duration};

use mcp_supervisor::{
    config::{Config, OAuthGrant, OAuthSettings, Transport, UpstreamAuth},
    oauth::{self, TokenFile},
};

use reqwest::Method;

use super::{
    admin_client::{AdminClient, block_on},
    browser,
    oneshot::load,
};
use crate::{cli::AdminTarget, exit::Exit};

/// `mcp-supervisor login NAME --config F [--timeout 300s]`.
pub(crate) fn login(config_path: &Path, name: &str, patience: Duration) -> Result<(), Exit> {
    let config = load(config_path)?;
    let (url, settings) = oauth_connection(&config, name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| Exit::Failed(format!("cannot start: {error}")))?;
    let logged_in = runtime
        .block_on(oauth::login(&url, &settings, open, patience))
        .map_err(|error| Exit::Failed(format!("login to '{name}' failed: {error}")))?;
    let scopes = if logged_in.scopes.is_empty() {
        "no scopes named".to_owned()
    } else {
        format!("scopes {}", logged_in.scopes.join(" "))
    };
    let lifetime = match logged_in.expires_in {
        Some(seconds) => format!("; the access token lives {seconds} s"),
        None => String::new(),
    };
    let refresh = if logged_in.refreshable {
        "; it is refreshed as needed"
    } else {
        "; no refresh token: log in again when it expires"
    };
    println!(
        "Logged in to '{name}' ({scopes}{lifetime}{refresh}). Tokens: {}",
        settings.token_file.display()
    );
    let told = tell_running_supervisor(config_path, name);
    if told {
        println!("The running supervisor uses them for '{name}' from its next call on.");
    }
    Ok(())
}

/// Asks a supervisor running on `config_path` (its admin address) to reset
/// `name`, so its next call uses the token file as it is now; `true` if it
/// did, else says why not (the login or logout itself succeeded).
fn tell_running_supervisor(config_path: &Path, name: &str) -> bool {
    let target = AdminTarget {
        admin: None,
        config: Some(config_path.to_owned()),
    };
    let told = AdminClient::new(target).and_then(|client| {
        block_on(client.request(Method::POST, &["connections", name, "reset"]))?
    });
    match told {
        Ok(answer) if answer.status.is_success() => return true,
        Ok(answer) => println!(
            "The running supervisor did not reset '{name}' ({}); run `mcp-supervisor reset {name}`.",
            answer.error_message()
        ),
        Err(_) => println!(
            "No supervisor answered at the config's admin address: `serve` reads the tokens when \
             it starts (for one running elsewhere: `mcp-supervisor reset {name} --admin HOST:PORT`)."
        ),
    }
    false
}

/// `mcp-supervisor logout NAME --config F`: removes the stored tokens.
pub(crate) fn logout(config_path: &Path, name: &str) -> Result<(), Exit> {
    let config = load(config_path)?;
    let (_, settings) = oauth_connection(&config, name)?;
    let file = TokenFile::new(settings.token_file.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|error| Exit::Failed(format!("cannot start: {error}")))?;
    match runtime.block_on(file.remove()) {
        Ok(true) => {
            println!("Logged out of '{name}': its tokens are removed.");
            // A running supervisor still holds them in memory until reset.
            if tell_running_supervisor(config_path, name) {
                println!("The running supervisor no longer uses them.");
            }
        }
        Ok(false) => println!("'{name}' had no stored tokens."),
        Err(error) => {
            return Err(Exit::Failed(format!(
                "cannot remove {}: {error}",
                settings.token_file.display()
            )));
        }
    }
    Ok(())
}

fn oauth_connection(config: &Config, name: &str) -> Result<(String, OAuthSettings), Exit> {
    let Some(connection) = config.connection(name) else {
        return Err(Exit::Usage(format!(
            "no connection named '{name}' in the config"
        )));
    };
    match &connection.transport {
        Transport::Http(http) => match &http.auth {
            Some(UpstreamAuth::OAuth(settings))
                if settings.grant == OAuthGrant::ClientCredentials =>
            {
                Err(Exit::Usage(format!(
                    "connection '{name}' uses grant = \"client_credentials\": it gets its own \
                     tokens and needs no login"
                )))
            }
            Some(UpstreamAuth::OAuth(settings)) => Ok((http.url.clone(), settings.clone())),
            _ => Err(Exit::Usage(format!(
                "connection '{name}' does not use OAuth (set auth = {{ kind = \"oauth\" }})"
            ))),
        },
        Transport::Stdio(_) => Err(Exit::Usage(format!(
            "connection '{name}' is a stdio connection; only http connections log in"
        ))),
    }
}

/// Shows the URL a person must open; with `$BROWSER` set, runs it (see
/// [`browser::open`]).
fn open(url: &str) {
    eprintln!("Open this URL to authorize mcp-supervisor:\n\n  {url}\n");
    browser::open(url);
    eprintln!("Waiting for the authorization to complete…");
}
