//! An owner's keys: the Ed25519 signing key that signs every artifact (kept by whoever
//! trains), its public verify key (given to every host that loads models), and the
//! XChaCha20-Poly1305 sealing key that encrypts the artifacts holding non-private parameters
//! (given to the hosts that answer from them, never needed to sign).
//!
//! A key directory holds `signing.key` (mode 0600), `verify.pub` and `sealing.key` (mode
//! 0600). Each file is one line, `<kind> <64 lower-case hex digits>`, read strictly.
//! The default directory is `$XDG_CONFIG_HOME/privpred/keys` (else `$HOME/.config/privpred/keys`).

use crate::error::{ReleaseError, Result};
use ed25519_dalek::{Signer, SigningKey as EdSigning, VerifyingKey};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// File name of the signing key in a key directory.
pub const SIGNING_FILE: &str = "signing.key";
/// File name of the verify key in a key directory.
pub const VERIFY_FILE: &str = "verify.pub";
/// File name of the sealing key in a key directory.
pub const SEALING_FILE: &str = "sealing.key";

const SIGNING_KIND: &str = "privpred-ed25519-signing-key";
const VERIFY_KIND: &str = "privpred-ed25519-verify-key";
const SEALING_KIND: &str = "privpred-xchacha20poly1305-sealing-key";

/// The owner's Ed25519 signing key.
pub struct SigningKey(EdSigning);

/// A public Ed25519 verify key: the key an artifact's signature is checked against.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VerifyKey(pub(crate) VerifyingKey);

/// A 256-bit XChaCha20-Poly1305 key that seals (encrypts and authenticates) an artifact's
/// payload.
pub struct SealingKey(pub(crate) Zeroizing<[u8; 32]>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey(verify key {})", self.verify_key().id())
    }
}

impl std::fmt::Debug for VerifyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerifyKey({})", self.id())
    }
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealingKey({})", self.id())
    }
}

fn os_random_32() -> Result<Zeroizing<[u8; 32]>> {
    use rand::TryRng;
    let mut b = Zeroizing::new([0u8; 32]);
    rand::rngs::SysRng
        .try_fill_bytes(b.as_mut())
        .map_err(|e| ReleaseError::Random(e.to_string()))?;
    Ok(b)
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N
        || !s
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl SigningKey {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<Self> {
        Ok(SigningKey(EdSigning::from_bytes(&*os_random_32()?)))
    }
    /// The public verify key.
    pub fn verify_key(&self) -> VerifyKey {
        VerifyKey(self.0.verifying_key())
    }
    pub(crate) fn sign(&self, msg: &[u8]) -> [u8; 64] {
        self.0.sign(msg).to_bytes()
    }
    /// Reads a `signing.key` file.
    pub fn read(path: &Path) -> Result<Self> {
        let b = read_key_line::<32>(path, SIGNING_KIND)?;
        Ok(SigningKey(EdSigning::from_bytes(&b)))
    }
    /// Writes the key (mode 0600; an existing file is never replaced).
    pub fn write(&self, path: &Path) -> Result<()> {
        let secret = Zeroizing::new(self.0.to_bytes());
        write_new(path, &key_line(SIGNING_KIND, secret.as_ref()), true)
    }
}

impl VerifyKey {
    /// The key's identity: its 32 bytes in hex (what an artifact's header names as `signer`).
    pub fn id(&self) -> String {
        hex(self.0.as_bytes())
    }
    /// The key named by an artifact's `signer` field.
    pub fn from_id(id: &str) -> Option<Self> {
        VerifyingKey::from_bytes(&unhex::<32>(id)?)
            .ok()
            .map(VerifyKey)
    }
    /// Reads a `verify.pub` file.
    pub fn read(path: &Path) -> Result<Self> {
        let b = read_key_line::<32>(path, VERIFY_KIND)?;
        VerifyingKey::from_bytes(&b)
            .map(VerifyKey)
            .map_err(|_| ReleaseError::Key {
                path: path.to_path_buf(),
                reason: "not an Ed25519 public key".into(),
            })
    }
    /// Writes the key (an existing file is never replaced).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_new(path, &key_line(VERIFY_KIND, self.0.as_bytes()), false)
    }
    pub(crate) fn verify(&self, msg: &[u8], sig: &[u8; 64]) -> bool {
        self.0
            .verify_strict(msg, &ed25519_dalek::Signature::from_bytes(sig))
            .is_ok()
    }
}

impl SealingKey {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<Self> {
        Ok(SealingKey(os_random_32()?))
    }
    /// The key's public identity: the first 16 bytes of SHA-256 over a domain tag and the key,
    /// in hex (an artifact's header names the key it was sealed with; the key itself cannot be
    /// recovered from it).
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"privpred-sealing-key-id-v1");
        h.update(self.0.as_ref());
        hex(&h.finalize()[..16])
    }
    /// Reads a `sealing.key` file.
    pub fn read(path: &Path) -> Result<Self> {
        Ok(SealingKey(Zeroizing::new(read_key_line::<32>(
            path,
            SEALING_KIND,
        )?)))
    }
    /// Writes the key (mode 0600; an existing file is never replaced).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_new(path, &key_line(SEALING_KIND, self.0.as_ref()), true)
    }
}

fn key_line(kind: &str, bytes: &[u8]) -> Zeroizing<String> {
    Zeroizing::new(format!("{kind} {}\n", hex(bytes)))
}

fn read_key_line<const N: usize>(path: &Path, kind: &str) -> Result<[u8; N]> {
    let bad = |reason: String| ReleaseError::Key {
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| ReleaseError::io(path, e))?;
    if meta.len() > 256 {
        return Err(bad("not a privpred key file (too long)".into()));
    }
    let text =
        Zeroizing::new(std::fs::read_to_string(path).map_err(|e| ReleaseError::io(path, e))?);
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let (k, v) = line
        .split_once(' ')
        .ok_or_else(|| bad(format!("not a privpred key file (expected `{kind} <hex>`)")))?;
    if k != kind {
        return Err(bad(format!(
            "holds a `{k}`, not a `{kind}` (check which file of the key directory you gave)"
        )));
    }
    unhex::<N>(v).ok_or_else(|| bad(format!("the key must be {} lower-case hex digits", 2 * N)))
}

/// Writes `text` to a new file `path` (refused if it exists), mode 0600 when `secret`.
fn write_new(path: &Path, text: &str, secret: bool) -> Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(if secret { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut f = o.open(path).map_err(|e| ReleaseError::io(path, e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| ReleaseError::io(path, e))
}

/// Where an owner's keys live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDir(pub PathBuf);

impl KeyDir {
    /// The signing key's path.
    pub fn signing(&self) -> PathBuf {
        self.0.join(SIGNING_FILE)
    }
    /// The verify key's path.
    pub fn verify(&self) -> PathBuf {
        self.0.join(VERIFY_FILE)
    }
    /// The sealing key's path.
    pub fn sealing(&self) -> PathBuf {
        self.0.join(SEALING_FILE)
    }

    /// The default key directory: `$XDG_CONFIG_HOME/privpred/keys`, else
    /// `$HOME/.config/privpred/keys`; `None` when neither variable is set.
    pub fn default_dir() -> Option<KeyDir> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".config"))
            })?;
        Some(KeyDir(base.join("privpred").join("keys")))
    }

    /// Writes a fresh set of keys into `dir` (created if missing). Refused when `dir`
    /// already holds any of the three files: a key is never overwritten.
    pub fn create(dir: &Path) -> Result<KeyDir> {
        std::fs::create_dir_all(dir).map_err(|e| ReleaseError::io(dir, e))?;
        let kd = KeyDir(dir.to_path_buf());
        for p in [kd.signing(), kd.verify(), kd.sealing()] {
            if p.exists() {
                return Err(ReleaseError::Key {
                    path: p,
                    reason: "exists: refusing to overwrite a key (choose another directory)".into(),
                });
            }
        }
        kd.write_fresh()?;
        Ok(kd)
    }

    fn write_fresh(&self) -> Result<()> {
        let s = SigningKey::generate()?;
        s.write(&self.signing())?;
        s.verify_key().write(&self.verify())?;
        SealingKey::generate()?.write(&self.sealing())
    }

    /// The directory as it is, or — when it does not exist yet — with a fresh set of keys,
    /// created atomically (written into a temporary sibling and renamed into place, so two
    /// processes creating it at once end up with the same keys). `Ok((dir, true))` when this
    /// call created it.
    pub fn open_or_create(dir: &Path) -> Result<(KeyDir, bool)> {
        let kd = KeyDir(dir.to_path_buf());
        if dir.exists() {
            return Ok((kd, false));
        }
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| ReleaseError::io(parent, e))?;
        let nonce: u64 = rand::random();
        let tmp = parent.join(format!(".keys.tmp.{}.{nonce:016x}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(|e| ReleaseError::io(&tmp, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700));
        }
        let staged = KeyDir(tmp.clone());
        let res = staged
            .write_fresh()
            .and_then(|_| std::fs::rename(&tmp, dir).map_err(|e| ReleaseError::io(dir, e)));
        match res {
            Ok(()) => Ok((kd, true)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                if dir.join(SIGNING_FILE).exists() {
                    Ok((kd, false)) // another process created it first
                } else {
                    Err(e)
                }
            }
        }
    }
}
