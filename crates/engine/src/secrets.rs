//! Encryption at rest for vault secrets (tokens, refresh tokens, client secrets).
//!
//! One 32-byte key seals every secret with XChaCha20-Poly1305 (RustCrypto's
//! `chacha20poly1305`): an authenticated cipher with 24-byte random nonces, so nonces never
//! need a counter shared between replicas. Each sealed value is bound to the row it belongs
//! to (the credential id as associated data), so a ciphertext copied onto another row does
//! not open. The key comes from `MAST_SECRET_KEY` (base64 of 32 bytes), a key file
//! (`MAST_SECRET_KEY_FILE`, the same base64 text), or — for the zero-configuration start —
//! a key generated into the data directory. Nothing here knows about HTTP, the engine or
//! the store.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// The name of the generated key file inside the data directory.
pub const KEY_FILE_NAME: &str = "secret.key";

/// Layout version of a sealed value (first byte), so the format can change later.
const VERSION: u8 = 1;
const NONCE_LEN: usize = 24;

/// Where the server's secret key comes from.
#[derive(Clone, Default)]
pub enum KeySource {
    /// Base64 of 32 bytes, given directly (`MAST_SECRET_KEY`).
    Inline(String),
    /// A file holding that base64 text (`MAST_SECRET_KEY_FILE`).
    File(PathBuf),
    /// Neither: generate one into the data directory on first start, reuse it afterwards.
    #[default]
    DataDir,
}

// The key itself never reaches a log line, even through `{:?}` of a config.
impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Inline(_) => f.write_str("Inline(<redacted>)"),
            KeySource::File(p) => f.debug_tuple("File").field(p).finish(),
            KeySource::DataDir => f.write_str("DataDir"),
        }
    }
}

/// A sealed value did not open: wrong key, another row's value, or a damaged one.
#[derive(Debug, thiserror::Error)]
#[error("a stored secret could not be decrypted (was MAST_SECRET_KEY changed?)")]
pub struct OpenError;

/// Seals and opens secrets with the server's key.
#[derive(Clone)]
pub struct Cipher {
    aead: XChaCha20Poly1305,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(<key redacted>)")
    }
}

impl Cipher {
    /// A cipher with this 32-byte key.
    pub fn new(key: &[u8; 32]) -> Self {
        Cipher {
            aead: XChaCha20Poly1305::new(key.into()),
        }
    }

    /// A cipher with a fresh random key (tests, throwaway servers).
    pub fn random() -> Self {
        Self::new(&rand::random::<[u8; 32]>())
    }

    /// Encrypts `plain`, bound to `context` (the row's id): version, nonce, ciphertext+tag.
    pub fn seal(&self, plain: &[u8], context: &str) -> Vec<u8> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let sealed = self
            .aead
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: context.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 encryption does not fail for in-memory sizes");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// Decrypts what [`Cipher::seal`] made for the same `context`.
    pub fn open(&self, sealed: &[u8], context: &str) -> Result<Vec<u8>, OpenError> {
        if sealed.len() < 1 + NONCE_LEN || sealed[0] != VERSION {
            return Err(OpenError);
        }
        let (nonce, body) = sealed[1..].split_at(NONCE_LEN);
        self.aead
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| OpenError)
    }

    /// Loads the key from `source`; with [`KeySource::DataDir`], reads `data_dir/secret.key`
    /// or creates it (mode 0600) with a loud warning, since losing it loses every stored
    /// credential.
    pub fn load(source: &KeySource, data_dir: &Path) -> anyhow::Result<Self> {
        let key = match source {
            KeySource::Inline(text) => {
                decode_key(text).context("MAST_SECRET_KEY must be base64 of 32 bytes")?
            }
            KeySource::File(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("could not read MAST_SECRET_KEY_FILE {}", path.display())
                })?;
                decode_key(&text).with_context(|| {
                    format!(
                        "{} must hold base64 of 32 bytes (MAST_SECRET_KEY_FILE)",
                        path.display()
                    )
                })?
            }
            KeySource::DataDir => data_dir_key(data_dir)?,
        };
        Ok(Self::new(&key))
    }
}

/// Reads base64 (standard alphabet, whitespace around it ignored) of exactly 32 bytes.
pub fn decode_key(text: &str) -> anyhow::Result<[u8; 32]> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|e| anyhow::anyhow!("not base64: {e}"))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| anyhow::anyhow!("decodes to {} bytes, not 32", bytes.len()))
}

/// A new key as the base64 text `MAST_SECRET_KEY` takes.
pub fn generate_key_text() -> String {
    STANDARD.encode(rand::random::<[u8; 32]>())
}

fn data_dir_key(data_dir: &Path) -> anyhow::Result<[u8; 32]> {
    let path = data_dir.join(KEY_FILE_NAME);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            return decode_key(&text)
                .with_context(|| format!("{} must hold base64 of 32 bytes", path.display()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("could not read {}", path.display())),
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("could not create {}", data_dir.display()))?;
    let text = generate_key_text();
    write_private(&path, &text)?;
    tracing::warn!(
        path = %path.display(),
        "no MAST_SECRET_KEY or MAST_SECRET_KEY_FILE given: generated a key for vault credentials at {}. \
         BACK IT UP: losing this file (or starting with another key) loses every stored credential. \
         Replicas sharing a database must all use the same key (set MAST_SECRET_KEY_FILE).",
        path.display()
    );
    decode_key(&text)
}

/// Creates `path` readable by its owner only, refusing to overwrite (two starts racing
/// keep the first key).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("could not create {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_bound_to_their_row() {
        let c = Cipher::random();
        let sealed = c.seal(b"tok-123", "vcrd_1");
        assert!(!sealed.windows(7).any(|w| w == b"tok-123"));
        assert_eq!(c.open(&sealed, "vcrd_1").unwrap(), b"tok-123");
        assert!(c.open(&sealed, "vcrd_2").is_err(), "another row's value");
        assert!(
            Cipher::random().open(&sealed, "vcrd_1").is_err(),
            "another key"
        );
        let mut bent = sealed.clone();
        *bent.last_mut().unwrap() ^= 1;
        assert!(c.open(&bent, "vcrd_1").is_err(), "a damaged value");
        assert_ne!(
            c.seal(b"tok-123", "vcrd_1"),
            sealed,
            "fresh nonce each time"
        );
    }

    #[test]
    fn keys_are_base64_of_32_bytes() {
        assert!(decode_key(&generate_key_text()).is_ok());
        assert!(decode_key("c2hvcnQ=").is_err());
        assert!(decode_key("not base64!").is_err());
    }

    #[test]
    fn a_generated_key_is_private_and_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::TempDir::new().unwrap();
        let a = Cipher::load(&KeySource::DataDir, dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = Cipher::load(&KeySource::DataDir, dir.path()).unwrap();
        assert_eq!(b.open(&a.seal(b"x", "c"), "c").unwrap(), b"x");
        let c = Cipher::load(&KeySource::File(path), dir.path()).unwrap();
        assert_eq!(c.open(&a.seal(b"y", "c"), "c").unwrap(), b"y");
    }
}
