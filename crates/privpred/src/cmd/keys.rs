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
use privpred_release::{KeyDir, ReleaseError, Released, Trust, VerifyKey, WriteKeys};
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

impl SignArgs {
    /// The keys a new model is written with.
    pub fn keys(&self) -> anyhow::Result<WriteKeys> {
        let (keys, created) = WriteKeys::from_files(self.signing_key.as_deref())
            .map_err(|e| usage(format!("--signing-key: {e}")))?;
        if let Some(dir) = created {
            eprintln!(
                "privpred: created your signing key in {} (first use; verify.pub there is what hosts trust, keep signing.key and sealing.key secret)",
                dir.display()
            );
        }
        Ok(keys)
    }
}

impl TrustArgs {
    /// What the opening commands trust.
    pub fn trust(&self) -> anyhow::Result<Trust> {
        Trust::from_files(
            self.trust.as_deref(),
            self.sealing_key.as_deref(),
            self.allow_unsigned,
        )
        .map_err(|e| usage(format!("--trust/--sealing-key: {e}")))
    }

    /// Opens a model file: envelope, signature, trust, seal, payload (exit 2 naming the
    /// reason when it is refused).
    pub fn open(&self, path: &Path) -> anyhow::Result<Released> {
        let trust = self.trust()?;
        let no_key = trust.keys.is_empty() && !trust.allow_unsigned;
        privpred_release::open_file(path, &trust).map_err(|e| {
            let hint = match no_key && matches!(e, ReleaseError::Refused { .. }) {
                true => " (no verify key is trusted: give --trust FILE, the owner's verify.pub)",
                false => "",
            };
            if e.is_user_error() {
                usage(format!("--model {e}{hint}"))
            } else {
                anyhow::Error::new(e).context("--model")
            }
        })
    }
}
