//! `privpred key new`, and the key arguments of the commands that write and open models:
//! `train --signing-key` signs (and, for a model holding non-private parameters, seals with
//! the `sealing.key` next to the signing key); `predict`, `serve` and `evaluate` take
//! `--trust` (a `verify.pub`), `--sealing-key` and `--allow-unsigned`, and open every model
//! through `privpred_release::open` (docs/security.md).
//!
//! Without `--signing-key`, `train` uses the default key directory
//! (`$XDG_CONFIG_HOME/privpred/keys`, else `~/.config/privpred/keys`), created on first use
//! with one line saying where; without `--trust`, the opening commands trust that
//! directory's `verify.pub`.

use crate::exit::usage;
use privpred_release::{
    KeyDir, ReleaseError, Released, SealingKey, SigningKey, Trust, VerifyKey, WriteKeys,
};
use std::path::{Path, PathBuf};

/// Arguments of `privpred key`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

/// `privpred key` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Write a new owner's key set into DIR: `signing.key` (mode 0600; signs models),
    /// `verify.pub` (give it to every host that loads models) and `sealing.key` (mode 0600;
    /// opens sealed models; give it only to the hosts that answer from them). An existing key
    /// is never overwritten.
    New {
        /// The directory (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// Runs `privpred key`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::New { out } => {
            let kd = KeyDir::create(&out).map_err(release_err)?;
            let v = VerifyKey::read(&kd.verify()).map_err(release_err)?;
            println!(
                "wrote {} (secret, signs), {} (public, verifies: key {}) and {} (secret, opens sealed models)",
                kd.signing().display(),
                kd.verify().display(),
                v.id(),
                kd.sealing().display()
            );
            Ok(())
        }
    }
}

/// The key argument of `train`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SignArgs {
    /// The owner's signing key (`signing.key` of `privpred key new`); a model holding
    /// non-private parameters is sealed with the `sealing.key` next to it. Default: the key
    /// in the user's config directory, created on first use.
    #[arg(long, value_name = "FILE")]
    pub signing_key: Option<PathBuf>,
}

/// The key arguments of `predict`, `serve` and `evaluate`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrustArgs {
    /// The verify key (`verify.pub`) whose signatures are trusted. Default: the one of the
    /// key in the user's config directory. A model not signed by it is refused.
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// The sealing key that opens sealed models (prediction sensitivity,
    /// subsample-and-aggregate, non-private). Default: `sealing.key` next to the trusted
    /// verify key.
    #[arg(long, value_name = "FILE")]
    pub sealing_key: Option<PathBuf>,
    /// Open a model that is unsigned or signed by a key that is not trusted; every answer is
    /// then marked as not covered.
    #[arg(long)]
    pub allow_unsigned: bool,
}

/// A release error as the CLI reports it (a bad file or key: exit 2).
pub fn release_err(e: ReleaseError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

fn default_dir() -> anyhow::Result<KeyDir> {
    KeyDir::default_dir().ok_or_else(|| {
        usage("no default key directory (neither XDG_CONFIG_HOME nor HOME is set): give the key files explicitly")
    })
}

impl SignArgs {
    /// The keys a new model is written with.
    pub fn keys(&self) -> anyhow::Result<WriteKeys> {
        let signing = match &self.signing_key {
            Some(f) => f.clone(),
            None => {
                let (kd, created) =
                    KeyDir::open_or_create(&default_dir()?.0).map_err(release_err)?;
                if created {
                    eprintln!(
                        "privpred: created your signing key in {} (first use; verify.pub there is what hosts trust, keep signing.key and sealing.key secret)",
                        kd.0.display()
                    );
                }
                kd.signing()
            }
        };
        let key = SigningKey::read(&signing)
            .map_err(|e| usage(format!("--signing-key: {}", ReleaseError::to_string(&e))))?;
        let sealing_path = sibling(&signing, privpred_release::keys::SEALING_FILE);
        let sealing = match sealing_path.exists() {
            true => Some(SealingKey::read(&sealing_path).map_err(release_err)?),
            false => None,
        };
        Ok(WriteKeys {
            signing: Some(key),
            sealing,
        })
    }
}

fn sibling(file: &Path, name: &str) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(name),
        _ => PathBuf::from(name),
    }
}

impl TrustArgs {
    /// What the opening commands trust.
    pub fn trust(&self) -> anyhow::Result<Trust> {
        let verify = match &self.trust {
            Some(f) => Some(f.clone()),
            None => KeyDir::default_dir()
                .map(|kd| kd.verify())
                .filter(|p| p.exists()),
        };
        let keys = match &verify {
            Some(f) => vec![VerifyKey::read(f).map_err(|e| usage(format!("--trust: {e}")))?],
            None => Vec::new(),
        };
        let sealing = match (&self.sealing_key, &verify) {
            (Some(f), _) => {
                Some(SealingKey::read(f).map_err(|e| usage(format!("--sealing-key: {e}")))?)
            }
            (None, Some(v)) => {
                let p = sibling(v, privpred_release::keys::SEALING_FILE);
                match p.exists() {
                    true => Some(SealingKey::read(&p).map_err(release_err)?),
                    false => None,
                }
            }
            (None, None) => None,
        };
        Ok(Trust {
            keys,
            sealing,
            allow_unsigned: self.allow_unsigned,
        })
    }

    /// Opens a model file: envelope, signature, trust, seal, payload (exit 2 naming the
    /// reason when it is refused).
    pub fn open(&self, path: &Path) -> anyhow::Result<Released> {
        let trust = self.trust()?;
        let no_key = trust.keys.is_empty() && !trust.allow_unsigned;
        privpred_release::open_file(path, &trust).map_err(|e| {
            if no_key && matches!(e, ReleaseError::Refused { .. }) {
                usage(format!(
                    "--model {e} (no verify key is trusted: give --trust FILE, the owner's verify.pub)"
                ))
            } else {
                release_err(e).context(format!("--model {}", path.display()))
            }
        })
    }
}
