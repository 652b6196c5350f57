//! Training runs that stop at a deadline and continue later from a checkpoint file, with the
//! same result as an uninterrupted run.
//!
//! A [`Resume`] names a checkpoint file, a segment length in steps and an optional deadline.
//! A training loop given one draws its random numbers (shuffles, Poisson batches,
//! augmentation seeds, DP-SGD noise) from a segment generator that is re-seeded from itself at
//! every segment boundary; at each boundary it writes the loop's whole state (step, the next
//! segment's seed, the shuffle order and position, the parameters and the momentum) to the
//! checkpoint file, atomically, and stops with [`NnError::Stopped`] once the deadline has
//! passed. A later run with the same file starts from that state, so the steps it takes are
//! exactly the steps the uninterrupted run would have taken: the result does not depend on
//! where (or how often) the run was stopped.
//!
//! The checkpoint holds parameters of a model trained on private data; like the training
//! data itself, it stays with the data owner (figure 7 is a study on public CIFAR-10).

use crate::error::{NnError, Result};
use rand::rand_core::TryRng;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The first bytes of a checkpoint file.
const MAGIC: &[u8; 8] = b"PPCKPT1\n";

/// Where and how often a training run checkpoints, and when it stops.
#[derive(Debug, Clone)]
pub struct Resume {
    path: PathBuf,
    every: usize,
    deadline: Option<Instant>,
}

/// The state of a training loop at a segment boundary.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Steps finished.
    pub step: usize,
    /// Steps planned.
    pub steps: usize,
    /// Seed of the next segment's generator.
    pub seed: u64,
    /// Position in the shuffle order (shuffled sampling).
    pub pos: usize,
    /// The shuffle order (empty for Poisson sampling).
    pub perm: Vec<u32>,
    /// Parameters.
    pub params: Vec<f32>,
    /// Momentum.
    pub velocity: Vec<f32>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    step: usize,
    steps: usize,
    seed: u64,
    pos: usize,
    perm: usize,
    params: usize,
}

impl Resume {
    /// Checkpoints to `path` every `every` (≥ 1) steps; stops at the first boundary after
    /// `deadline`, if any.
    pub fn new(path: impl Into<PathBuf>, every: usize, deadline: Option<Instant>) -> Result<Self> {
        if every == 0 {
            return Err(NnError::invalid(
                "checkpoint interval",
                every,
                "must be ≥ 1 step",
            ));
        }
        Ok(Resume {
            path: path.into(),
            every,
            deadline,
        })
    }

    /// The checkpoint file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Steps per segment.
    pub fn every(&self) -> usize {
        self.every
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The checkpoint, if the file exists. A file that is not a checkpoint, is damaged, or
    /// belongs to another run (other step count or parameter count) is an error naming it.
    pub fn load(&self, steps: usize, n_params: usize) -> Result<Option<Checkpoint>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(NnError::io(&self.path, e)),
        };
        let c = decode(&bytes).map_err(|m| NnError::format(&self.path, m))?;
        if c.steps != steps || c.params.len() != n_params || c.step > steps {
            return Err(NnError::format(
                &self.path,
                format!(
                    "checkpoint of a run of {} steps and {} parameters at step {}, this run has \
                     {steps} steps and {n_params} parameters (remove the file to start over)",
                    c.steps,
                    c.params.len(),
                    c.step
                ),
            ));
        }
        Ok(Some(c))
    }

    /// Writes `c` atomically (a temporary file, then a rename).
    pub fn save(&self, c: &Checkpoint) -> Result<()> {
        let tmp = self.path.with_extension("ckpt.tmp");
        std::fs::write(&tmp, encode(c)).map_err(|e| NnError::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| NnError::io(&self.path, e))
    }

    /// Removes the checkpoint (after the run finished and its result was stored).
    pub fn remove(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(NnError::io(&self.path, e)),
            _ => Ok(()),
        }
    }
}

fn encode(c: &Checkpoint) -> Vec<u8> {
    let h = Header {
        step: c.step,
        steps: c.steps,
        seed: c.seed,
        pos: c.pos,
        perm: c.perm.len(),
        params: c.params.len(),
    };
    let hj = serde_json::to_vec(&h).expect("a header serialises");
    let mut out = Vec::with_capacity(64 + hj.len() + 4 * (c.perm.len() + 2 * c.params.len()));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(hj.len() as u64).to_le_bytes());
    out.extend_from_slice(&hj);
    c.perm
        .iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    c.params
        .iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    c.velocity
        .iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    out
}

fn decode(b: &[u8]) -> std::result::Result<Checkpoint, String> {
    if b.len() < MAGIC.len() + 8 + 32 || &b[..8] != MAGIC {
        return Err("not a privpred-nn checkpoint".into());
    }
    let (body, digest) = b.split_at(b.len() - 32);
    if Sha256::digest(body).as_slice() != digest {
        return Err("checkpoint damaged (checksum mismatch)".into());
    }
    let hl = u64::from_le_bytes(body[8..16].try_into().expect("8 bytes")) as usize;
    let rest = body.get(16..).ok_or("truncated")?;
    if hl > rest.len() {
        return Err("checkpoint header longer than the file".into());
    }
    let h: Header = serde_json::from_slice(&rest[..hl]).map_err(|e| e.to_string())?;
    let data = &rest[hl..];
    let want = h
        .perm
        .checked_add(h.params.checked_mul(2).ok_or("sizes overflow")?)
        .and_then(|w| w.checked_mul(4))
        .ok_or("sizes overflow")?;
    if data.len() != want {
        return Err(format!(
            "checkpoint body has {} bytes, its header says {want}",
            data.len()
        ));
    }
    let words = |s: &[u8]| -> Vec<[u8; 4]> {
        s.chunks_exact(4)
            .map(|c| c.try_into().expect("4 bytes"))
            .collect()
    };
    let (p, rest) = data.split_at(4 * h.perm);
    let (w, v) = rest.split_at(4 * h.params);
    let perm: Vec<u32> = words(p).into_iter().map(u32::from_le_bytes).collect();
    if h.pos > perm.len() || perm.iter().any(|&i| i as usize >= perm.len()) {
        return Err("checkpoint shuffle order out of range".into());
    }
    Ok(Checkpoint {
        step: h.step,
        steps: h.steps,
        seed: h.seed,
        pos: h.pos,
        perm,
        params: words(w).into_iter().map(f32::from_le_bytes).collect(),
        velocity: words(v).into_iter().map(f32::from_le_bytes).collect(),
    })
}

/// The generator a training loop draws from: the caller's (no [`Resume`]) or the current
/// segment's (re-seeded at every boundary).
pub(crate) enum LoopRng<'a, R: Rng> {
    /// The caller's generator, used throughout.
    Outer(&'a mut R),
    /// The current segment's generator.
    Segment(Box<ChaCha20Rng>),
}

impl<'a, R: Rng> LoopRng<'a, R> {
    /// The caller's generator for a run without `resume`; for a run with one, the generator
    /// of the first segment, seeded from `seed` (a checkpoint's) or else from the caller's.
    pub(crate) fn start(rng: &'a mut R, resume: Option<&Resume>, seed: Option<u64>) -> Self {
        match (resume, seed) {
            (None, _) => LoopRng::Outer(rng),
            (Some(_), Some(s)) => LoopRng::Segment(Box::new(ChaCha20Rng::seed_from_u64(s))),
            (Some(_), None) => LoopRng::Segment(Box::new(ChaCha20Rng::seed_from_u64(rng.random()))),
        }
    }

    /// At a segment boundary: re-seeds the segment generator and returns the new seed (None
    /// without a [`Resume`]).
    pub(crate) fn reseed(&mut self) -> Option<u64> {
        match self {
            LoopRng::Outer(_) => None,
            LoopRng::Segment(g) => {
                let s: u64 = g.random();
                **g = ChaCha20Rng::seed_from_u64(s);
                Some(s)
            }
        }
    }
}

impl<R: Rng> TryRng for LoopRng<'_, R> {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> std::result::Result<u32, Infallible> {
        Ok(match self {
            LoopRng::Outer(r) => r.next_u32(),
            LoopRng::Segment(g) => g.next_u32(),
        })
    }
    fn try_next_u64(&mut self) -> std::result::Result<u64, Infallible> {
        Ok(match self {
            LoopRng::Outer(r) => r.next_u64(),
            LoopRng::Segment(g) => g.next_u64(),
        })
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(), Infallible> {
        match self {
            LoopRng::Outer(r) => r.fill_bytes(dst),
            LoopRng::Segment(g) => g.fill_bytes(dst),
        }
        Ok(())
    }
}

/// The end of step `step` (1-based, of `steps`) of a loop with `resume`: at a segment
/// boundary re-seeds `rng`, writes the checkpoint that `state` builds, and stops with
/// [`NnError::Stopped`] when the deadline has passed.
pub(crate) fn boundary<R: Rng>(
    resume: Option<&Resume>,
    rng: &mut LoopRng<'_, R>,
    step: usize,
    steps: usize,
    state: impl FnOnce(u64) -> Checkpoint,
) -> Result<()> {
    if checkpoint_at(resume, rng, step, steps, state)? {
        stop_if_expired(resume, step, steps)?;
    }
    Ok(())
}

/// [`boundary`] without the stop: at a segment boundary re-seeds `rng` and writes the
/// checkpoint; returns whether it did. Loops that step several runs together save every run's
/// checkpoint before asking [`stop_if_expired`].
pub(crate) fn checkpoint_at<R: Rng>(
    resume: Option<&Resume>,
    rng: &mut LoopRng<'_, R>,
    step: usize,
    steps: usize,
    state: impl FnOnce(u64) -> Checkpoint,
) -> Result<bool> {
    let Some(r) = resume else { return Ok(false) };
    if step >= steps || !step.is_multiple_of(r.every) {
        return Ok(false);
    }
    let Some(seed) = rng.reseed() else {
        return Ok(false);
    };
    r.save(&state(seed))?;
    Ok(true)
}

/// [`NnError::Stopped`] (naming step `step` of `steps` and the checkpoint) when `resume`'s
/// deadline has passed.
pub(crate) fn stop_if_expired(resume: Option<&Resume>, step: usize, steps: usize) -> Result<()> {
    match resume {
        Some(r) if r.expired() => Err(NnError::Stopped(format!(
            "time limit reached at step {step}/{steps}; the checkpoint {} continues the run",
            r.path.display()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            step: 7,
            steps: 20,
            seed: 42,
            pos: 2,
            perm: vec![2, 0, 1],
            params: vec![1.5, -2.0],
            velocity: vec![0.25, 0.0],
        }
    }

    #[test]
    fn a_checkpoint_round_trips_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let r = Resume::new(dir.path().join("a.ckpt"), 5, None).unwrap();
        assert_eq!(r.load(20, 2).unwrap(), None);
        r.save(&sample()).unwrap();
        assert_eq!(r.load(20, 2).unwrap(), Some(sample()));
        let e = r.load(21, 2).unwrap_err().to_string();
        assert!(e.contains("21 steps"), "{e}");
        let mut b = std::fs::read(r.path()).unwrap();
        let k = b.len() - 40;
        b[k] ^= 1;
        std::fs::write(r.path(), &b).unwrap();
        let e = r.load(20, 2).unwrap_err().to_string();
        assert!(e.contains("damaged"), "{e}");
        r.remove().unwrap();
        assert_eq!(r.load(20, 2).unwrap(), None);
        assert!(Resume::new("x", 0, None).is_err());
    }
}
