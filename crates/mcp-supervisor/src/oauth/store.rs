//! [`TokenFile`]: one OAuth connection's tokens in a file of its own, mode
//! 0600 in a 0700 directory, replaced atomically; rmcp's
//! [`CredentialStore`] over it, with the contents cached in memory (rmcp
//! loads the credentials on every request).

use std::{
    fmt, fs,
    io::{self, Write},
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::Arc,
};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;

/// What the file holds. Versioned, so a later format can read this one.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Contents {
    version: u32,
    credentials: Option<StoredCredentials>,
    /// Scopes a 403 `insufficient_scope` named that the tokens lack: the
    /// next login asks for them too (step-up).
    #[serde(default)]
    wanted_scopes: Vec<String>,
}

const VERSION: u32 = 1;

/// A connection's token file. Cloning shares the cache.
#[derive(Clone)]
pub struct TokenFile {
    path: Arc<Path>,
    /// `None`: not read yet.
    cached: Arc<RwLock<Option<Contents>>>,
}

impl fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenFile")
            .field("path", &self.path)
            .finish()
    }
}

impl TokenFile {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path: path.into(),
            cached: Arc::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored credentials, read from the file the first time.
    pub async fn credentials(&self) -> io::Result<Option<StoredCredentials>> {
        Ok(self.contents().await?.credentials)
    }

    /// Scopes a server asked for that the stored tokens lack.
    pub async fn wanted_scopes(&self) -> io::Result<Vec<String>> {
        Ok(self.contents().await?.wanted_scopes)
    }

    async fn contents(&self) -> io::Result<Contents> {
        if let Some(cached) = self.cached.read().await.as_ref() {
            return Ok(cached.clone());
        }
        let mut cached = self.cached.write().await;
        let read = read(&self.path)?;
        *cached = Some(read.clone());
        Ok(read)
    }

    /// Replaces the stored credentials with `credentials`; the wanted
    /// scopes they were granted are no longer wanted.
    pub async fn store(&self, credentials: StoredCredentials) -> io::Result<()> {
        self.update(|contents| {
            contents
                .wanted_scopes
                .retain(|scope| !credentials.granted_scopes.contains(scope));
            contents.credentials = Some(credentials);
        })
        .await
    }

    /// Adds `scopes` to the wanted ones (a step-up the next login asks for).
    pub async fn want(&self, scopes: &[String]) -> io::Result<()> {
        self.update(|contents| {
            for scope in scopes {
                if !contents.wanted_scopes.contains(scope) {
                    contents.wanted_scopes.push(scope.clone());
                }
            }
        })
        .await
    }

    /// Changes the file: read again first, not taken from the cache, since
    /// another process (a `login`) may have replaced it since.
    async fn update(&self, change: impl FnOnce(&mut Contents)) -> io::Result<()> {
        let mut cached = self.cached.write().await;
        let mut contents = read(&self.path)?;
        change(&mut contents);
        write(&self.path, &contents)?;
        *cached = Some(contents);
        Ok(())
    }

    /// Removes the file; `false` if there was none.
    pub async fn remove(&self) -> io::Result<bool> {
        let mut cached = self.cached.write().await;
        let removed = match fs::remove_file(&self.path) {
            Ok(()) => true,
            Err(error) if error.kind() == io::ErrorKind::NotFound => false,
            Err(error) => return Err(error),
        };
        *cached = Some(Contents::default());
        Ok(removed)
    }
}

fn read(path: &Path) -> io::Result<Contents> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Contents::default()),
        Err(error) => return Err(error),
    };
    // serde's message could quote the file's text (a token): not passed on.
    let contents: Contents = serde_json::from_slice(&text).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the token file is not in the expected format (log in again)",
        )
    })?;
    if contents.version != VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the token file is of another version (log in again)",
        ));
    }
    Ok(contents)
}

/// Writes a new file beside the old one (0600 from its creation) and
/// renames it over, so a reader sees the old tokens or the new, never half.
fn write(path: &Path, contents: &Contents) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let contents = Contents {
        version: VERSION,
        ..contents.clone()
    };
    let bytes = serde_json::to_vec_pretty(&contents).map_err(io::Error::other)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // Unique per write, so two writers never share (or delete) one.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

fn store_error(action: &str, path: &Path, error: &io::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{action} {}: {error}", path.display()))
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.credentials()
            .await
            .map_err(|error| store_error("cannot read", &self.path, &error))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.store(credentials)
            .await
            .map_err(|error| store_error("cannot write", &self.path, &error))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove()
            .await
            .map(drop)
            .map_err(|error| store_error("cannot remove", &self.path, &error))
    }

    /// A refresh token the server rejected is dropped (the client id kept):
    /// the connection needs a login, and nothing is sent until then.
    async fn on_refresh_token_rejected(
        &self,
        rejected: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let mut kept = rejected.clone();
        kept.token_response = None;
        self.save(kept).await
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_owned(), None, vec!["read".to_owned()], Some(1))
    }

    #[tokio::test]
    async fn tokens_are_kept_in_a_private_file_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/oauth/a.json");
        let file = TokenFile::new(path.clone());
        assert!(file.credentials().await.unwrap().is_none());
        file.store(credentials("one")).await.unwrap();
        file.store(credentials("two")).await.unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // Only the file itself: no temporary left beside it.
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
        let fresh = TokenFile::new(path.clone());
        assert_eq!(fresh.credentials().await.unwrap().unwrap().client_id, "two");
        assert!(fresh.remove().await.unwrap());
        assert!(fresh.credentials().await.unwrap().is_none());
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn wanted_scopes_are_kept_until_a_login_grants_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile::new(dir.path().join("a.json"));
        file.store(credentials("one")).await.unwrap();
        file.want(&["admin".to_owned(), "read".to_owned()])
            .await
            .unwrap();
        let fresh = TokenFile::new(dir.path().join("a.json"));
        assert_eq!(fresh.wanted_scopes().await.unwrap(), ["admin", "read"]);
        assert_eq!(fresh.credentials().await.unwrap().unwrap().client_id, "one");
        // `credentials` were granted "read": only "admin" is still wanted.
        fresh.store(credentials("two")).await.unwrap();
        assert_eq!(fresh.wanted_scopes().await.unwrap(), ["admin"]);
    }

    #[tokio::test]
    async fn a_write_keeps_what_another_process_stored_since_this_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let running = TokenFile::new(path.clone());
        running.store(credentials("old")).await.unwrap();
        // A `login` in another process replaces the tokens...
        TokenFile::new(path.clone())
            .store(credentials("new"))
            .await
            .unwrap();
        // ...and the running one, recording a step-up, must not undo it.
        running.want(&["admin".to_owned()]).await.unwrap();
        let fresh = TokenFile::new(path);
        assert_eq!(fresh.credentials().await.unwrap().unwrap().client_id, "new");
        assert_eq!(fresh.wanted_scopes().await.unwrap(), ["admin"]);
    }

    #[tokio::test]
    async fn a_damaged_file_is_an_error_that_quotes_nothing_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        fs::write(&path, "{\"version\":1,\"credentials\":\"sk-canary-token").unwrap();
        let error = TokenFile::new(path).credentials().await.unwrap_err();
        assert!(!error.to_string().contains("canary"), "{error}");
    }
}
