//! Figure 7's teachers: trained one after another or, on an engine that computes a group's
//! gradients in one pass, together in lock step (the same steps either way), each cached on
//! its own, and saved together as the ensemble artifact.

use super::{
    CachedPredictions, Fig7Context, ModelHeader, ModelKind, NnModel, Privacy, Result, artifact,
    calib, read_json, read_params, stable_seed, train, write_json, write_params,
};
use privpred_nn::engine;
use privpred_nn::train::Progress;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

impl Fig7Context {
    /// Every teacher's test predictions, each trained (resumably) and cached on its own:
    /// teacher k trains on slice k of a partition seeded by the run seed, from a generator
    /// seeded by (run seed, k), so teachers can be trained in any order, across runs, and one
    /// by one or together ([`engine::teachers_together`]) with the same steps.
    pub(super) fn teacher_predictions(
        &mut self,
        key: &str,
        observer: &mut dyn FnMut(&str, &Progress),
    ) -> Result<Vec<Vec<u32>>> {
        let t = self.cfg.teachers;
        let mut prng = ChaCha20Rng::seed_from_u64(stable_seed(self.cfg.seed, "partition"));
        let part = train::partition(self.train.len(), t, &mut prng)?;
        let mut preds: Vec<Option<Vec<u32>>> = (0..t)
            .map(|k| {
                read_json::<CachedPredictions>(&self.teacher_path(key, k, "json"))
                    .filter(|c| c.predictions.len() == self.test.len())
                    .map(|c| c.predictions)
            })
            .collect();
        let todo: Vec<usize> = (0..t).filter(|&k| preds[k].is_none()).collect();
        let shards: Vec<_> = todo.iter().map(|&k| self.train.subset(&part[k])).collect();
        let sgd = &self.cfg.teacher_sgd;
        let resumes = todo
            .iter()
            .zip(&shards)
            .map(|(&k, s)| {
                let b = sgd.batch_size.min(s.len());
                self.resume(&format!("{key}-t{k}"), s.len(), b)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut rngs: Vec<ChaCha20Rng> = todo
            .iter()
            .map(|&k| {
                ChaCha20Rng::seed_from_u64(stable_seed(self.cfg.seed, &format!("teacher-{k}")))
            })
            .collect();
        let tags: Vec<String> = todo
            .iter()
            .map(|&k| format!("teacher {}/{t}", k + 1))
            .collect();
        let together = match self.teachers_together {
            Some(v) => v,
            None => engine::teachers_together(&*self.engine)?,
        };
        let members = rngs
            .iter_mut()
            .zip(shards.iter().zip(&resumes))
            .map(|(rng, (data, resume))| train::GroupMember {
                data,
                cfg: sgd,
                rng,
                resume: Some(resume),
            })
            .collect();
        // one after another, each teacher is cached as soon as it is trained, so a later run
        // skips it
        let mut done = vec![Vec::new(); todo.len()];
        train::train_members_on(
            &*self.engine,
            &self.net,
            &self.norm,
            members,
            todo.len() >= 2 && together,
            &mut |j, p| {
                done[j] = self.finish_teacher(key, todo[j], &p, &resumes[j])?;
                Ok(())
            },
            &mut |j, p| observer(&tags[j], p),
        )?;
        for (&k, pred) in todo.iter().zip(done) {
            preds[k] = Some(pred);
        }
        Ok(preds.into_iter().flatten().collect())
    }

    /// `{key}-t{k}.{ext}` under the cache directory.
    fn teacher_path(&self, key: &str, k: usize, ext: &str) -> std::path::PathBuf {
        self.cfg.cache_dir.join(format!("{key}-t{k}.{ext}"))
    }

    /// Teacher k's test predictions from its trained parameters `p`, cached with them (and
    /// its accuracy); its checkpoint is then removed. Idempotent.
    fn finish_teacher(
        &self,
        key: &str,
        k: usize,
        p: &[f32],
        resume: &privpred_nn::resume::Resume,
    ) -> Result<Vec<u32>> {
        let pred = train::predict_labels_on(&*self.engine, &self.net, p, &self.test, &self.norm)?;
        let acc = train::accuracy(&pred, &self.test.labels);
        write_params(&self.teacher_path(key, k, "params"), p)?;
        write_json(
            &self.teacher_path(key, k, "json"),
            &CachedPredictions {
                predictions: pred.clone(),
                accuracy: acc,
                calibration: None,
            },
        )?;
        resume.remove()?;
        Ok(pred)
    }

    /// The ensemble as an artifact under the cache directory, when every teacher's
    /// parameters are there (teachers trained on another machine keep only their predictions).
    /// B = 10, ε = 1 as a default guarantee label: serve re-calibrates β for its own (ε, δ, B).
    pub(super) fn save_ensemble(&self, key: &str) -> Result<()> {
        let mut params = Vec::with_capacity(self.cfg.teachers);
        for k in 0..self.cfg.teachers {
            match read_params(&self.teacher_path(key, k, "params"), self.net.num_params()) {
                Some(p) => params.push(p),
                None => return Ok(()),
            }
        }
        let cal = calib::subsample_aggregate(
            self.cfg.mode,
            Privacy::new(1.0, 1e-5)?,
            10,
            self.net.classes(),
        )?;
        let model = NnModel::new(
            ModelHeader {
                kind: ModelKind::Teachers,
                config: self.cfg.net,
                normalization: self.norm.clone(),
                calibration: Some(cal),
                training: Some(calib::PublicTraining {
                    n: self.train.len(),
                    dp_sgd: None,
                    teachers: Some(params.len()),
                }),
                // an experiment: the partition and the teachers are seeded from the run seed
                seed_policy: Some(privpred_core::SeedPolicy::Seeded {
                    seed: self.cfg.seed,
                }),
                members: params.len(),
                class_names: None,
                data_source: self.train.source.clone(),
            },
            params,
            serde_json::json!({"teacher_sgd": self.cfg.teacher_sgd, "quick": self.cfg.quick, "partition_seed": "derived from the run seed", "engine": self.engine.describe()}),
        )?;
        artifact::save(
            &self.cfg.cache_dir.join(format!("{key}.safetensors")),
            &model,
        )
    }
}
