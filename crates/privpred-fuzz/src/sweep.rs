//! The command-line bad-input sweep: hundreds of generated bad inputs per command, each run
//! as a `privpred` process with a timeout. A case fails if the process is killed by a signal
//! (a panic abort, a failed allocation), runs past its timeout (a hang), prints `panicked`,
//! or exits 0 on input that must be refused (a corrupted model artifact, a bad flag value).
//! Corrupted *data* files may be accepted when the corruption leaves valid data (a digit
//! changed in a feature value); those are counted separately.
//!
//! `privpred-fuzz sweep --bin target/release/privpred [--cases 200] [--timeout 20]`

mod png;
mod round3;
mod round4;

use png::crate_png;
pub use png::png;

use crate::{Rng, mutate};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Tally {
    /// Error kinds (first line of stderr, digits and paths elided) → count, for `--verbose`.
    kinds: std::collections::BTreeMap<String, u32>,
    cases: u32,
    refused: u32,
    accepted: u32,
    failures: Vec<String>,
}

enum Expect {
    /// Must be refused (exit 2; exit 1 tolerated for I/O).
    Refused,
    /// May be accepted (exit 0) or refused.
    Either,
    /// Must be refused as bad input: exit 2 exactly.
    Usage,
}

/// The config directory of every `privpred` the sweep runs (set once, before the first):
/// the default key set `train` creates on first use lives there, never in the real home.
static CONFIG_HOME: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// A `privpred` command with the sweep's config directory.
fn privpred(bin: &Path) -> Command {
    let mut c = Command::new(bin);
    if let Some(h) = CONFIG_HOME.get() {
        c.env("XDG_CONFIG_HOME", h);
    }
    c
}

fn run_case(bin: &Path, args: &[String], timeout: Duration, expect: Expect, t: &mut Tally) {
    t.cases += 1;
    let mut child = match privpred(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            t.failures.push(format!("{args:?}: cannot start: {e}"));
            return;
        }
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    let short: Vec<String> = args.iter().map(|a| a.chars().take(80).collect()).collect();
    match status {
        None => t.failures.push(format!("HANG (> {timeout:?}): {short:?}")),
        Some(s) if s.code().is_none() => t
            .failures
            .push(format!("KILLED by a signal: {short:?}: {err}")),
        Some(_) if err.contains("panicked") => t.failures.push(format!("PANIC: {short:?}: {err}")),
        Some(s) if s.code() == Some(0) => match expect {
            Expect::Refused | Expect::Usage => {
                t.failures.push(format!("ACCEPTED bad input: {short:?}"))
            }
            Expect::Either => t.accepted += 1,
        },
        Some(s) if matches!(expect, Expect::Usage) && s.code() != Some(2) => {
            t.failures.push(format!(
                "EXIT {:?} (bad input must exit 2): {short:?}: {err}",
                s.code()
            ))
        }
        Some(_) => {
            t.refused += 1;
            let first = err.lines().next().unwrap_or("").to_string();
            let key: String = first
                .split(": ")
                .filter(|w| !w.contains('/'))
                .collect::<Vec<_>>()
                .join(": ")
                .chars()
                .filter(|c| !c.is_ascii_digit())
                .take(90)
                .collect();
            *t.kinds.entry(key).or_default() += 1;
        }
    }
}

fn s(x: impl AsRef<std::ffi::OsStr>) -> String {
    x.as_ref().to_string_lossy().into_owned()
}

/// A valid CSV: 120 rows, 4 features, 3 classes, header.
fn csv_base() -> Vec<u8> {
    let mut out = String::from("a,b,c,d,label\n");
    for i in 0..120u32 {
        let y = i % 3;
        let v: Vec<String> = (0..4)
            .map(|j| ((i * 31 + j * 7) % 40 + if j == y { 100 } else { 0 }).to_string())
            .collect();
        out.push_str(&format!("{},{y}\n", v.join(",")));
    }
    out.into_bytes()
}

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

fn gz(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// Runs the sweep; returns the exit status (1 if any case failed).
///
/// Parses the flags, trains the base models the artifact cases mutate, runs each family of
/// bad inputs in turn (one `Sweep` method each, in a fixed order so that the seeded
/// mutations are the same from run to run) and prints the report.
pub fn main(args: &[String]) -> i32 {
    let opts = SweepOptions::parse(args);
    let tmp = tempfile::tempdir().expect("temporary directory");
    let _ = CONFIG_HOME.set(tmp.path().join("config"));
    let Some(mut sweep) = Sweep::prepare(&opts, tmp.path()) else {
        return 1;
    };
    let report = vec![
        sweep.csv_files(),
        sweep.idx_sets(),
        sweep.image_archives(),
        sweep.model_artifacts(),
        sweep.numeric_flags(),
        sweep.paths(),
        sweep.second_round(),
        sweep.third_round(),
        sweep.parquet_tables(),
        sweep.edges_and_flags(),
    ];
    print_report(&report, opts.verbose)
}

/// The sweep's flags: `--bin`, `--cases`, `--timeout` (seconds), `--verbose`.
struct SweepOptions {
    bin: PathBuf,
    cases: usize,
    timeout: Duration,
    verbose: bool,
}

impl SweepOptions {
    /// Reads the flags; a missing or unparsable value keeps the default.
    fn parse(args: &[String]) -> Self {
        let mut bin = PathBuf::from("target/release/privpred");
        let mut cases = 200usize;
        let mut timeout = Duration::from_secs(20);
        let mut verbose = false;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--bin" => bin = it.next().map(PathBuf::from).unwrap_or(bin),
                "--cases" => cases = it.next().and_then(|v| v.parse().ok()).unwrap_or(cases),
                "--timeout" => {
                    timeout =
                        Duration::from_secs(it.next().and_then(|v| v.parse().ok()).unwrap_or(20))
                }
                "--verbose" => verbose = true,
                _ => {}
            }
        }
        SweepOptions {
            bin,
            cases,
            timeout,
            verbose,
        }
    }
}

/// What every family of cases shares: the binary, the seeded mutation source, a working
/// directory with a valid CSV (`ds`), a query file (`q`) and the base models' bytes.
struct Sweep {
    bin: PathBuf,
    cases: usize,
    timeout: Duration,
    dir: PathBuf,
    rng: Rng,
    csv: Vec<u8>,
    ds: String,
    q: PathBuf,
    m0: PathBuf,
    models: Vec<Vec<u8>>,
}

impl Sweep {
    /// Writes the valid CSV and the query file into `dir` and trains the base models on the
    /// CSV (subsample-and-aggregate, prediction sensitivity, model sensitivity with PCA);
    /// `None` (after saying why) if one cannot be trained.
    fn prepare(opts: &SweepOptions, dir: &Path) -> Option<Sweep> {
        let csv = csv_base();
        let good_csv = dir.join("good.csv");
        std::fs::write(&good_csv, &csv).unwrap();
        let ds = format!("csv-pixels:{}", good_csv.display());
        let bin = &opts.bin;
        let mut models = Vec::new();
        for (m, extra) in [
            (
                "subsample-aggregate",
                vec!["--epsilon", "1", "--budget", "10", "--teachers", "4"],
            ),
            (
                "prediction-sensitivity",
                vec!["--epsilon", "1", "--budget", "10"],
            ),
            ("model-sensitivity", vec!["--epsilon", "1"]),
            // a PCA basis fitted on the training data: non-private models only
            ("non-private", vec!["--pca", "2"]),
        ] {
            let out = dir.join(format!("{m}.safetensors"));
            let mut a = vec![
                "train".to_string(),
                m.into(),
                "--dataset".into(),
                ds.clone(),
                // the class count is a public parameter the caller declares
                "--classes".into(),
                "3".into(),
            ];
            a.extend(extra.iter().map(|x| x.to_string()));
            a.extend(["--seed".into(), "1".into(), "--out".into(), s(&out)]);
            let st = privpred(bin).args(&a).output().expect("run privpred");
            if !st.status.success() {
                eprintln!(
                    "cannot train the base model {m}: {}",
                    String::from_utf8_lossy(&st.stderr)
                );
                return None;
            }
            models.push(std::fs::read(&out).unwrap());
        }
        let q = dir.join("q.csv");
        std::fs::write(&q, "10,20,30,40\n").unwrap();
        Some(Sweep {
            bin: opts.bin.clone(),
            cases: opts.cases,
            timeout: opts.timeout,
            dir: dir.to_path_buf(),
            rng: Rng::new(20),
            csv,
            ds,
            q,
            m0: dir.join("prediction-sensitivity.safetensors"),
            models,
        })
    }

    /// Family 1: CSV files: mutated copies of a valid CSV (one in five gzipped), trained on by
    /// `train non-private`; a mutation may leave valid data.
    fn csv_files(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        for i in 0..self.cases {
            let bad = mutate(&self.csv, &self.csv, &mut self.rng);
            let p = self.dir.join(format!("c{i}.csv"));
            std::fs::write(&p, if i % 5 == 0 { gz(&bad) } else { bad }).unwrap();
            let args = vec![
                "train".into(),
                "non-private".into(),
                "--dataset".into(),
                format!("csv-pixels:{}", p.display()),
                "--out".into(),
                s(self.dir.join("o.safetensors")),
            ];
            run_case(&self.bin, &args, self.timeout, Expect::Either, &mut t);
        }
        ("train csv:FILE (mutated CSV)", t)
    }

    /// Family 2: IDX sets: one of the four files of a small IDX set mutated (plain or gzip), read
    /// by `data info`.
    fn idx_sets(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let files = [
            (
                "train-images-idx3-ubyte",
                idx(
                    &[30, 4, 4],
                    &(0..480).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
                ),
            ),
            (
                "train-labels-idx1-ubyte",
                idx(&[30], &(0..30).map(|i| (i % 3) as u8).collect::<Vec<_>>()),
            ),
            (
                "t10k-images-idx3-ubyte",
                idx(
                    &[10, 4, 4],
                    &(0..160).map(|i| (i * 5) as u8).collect::<Vec<_>>(),
                ),
            ),
            (
                "t10k-labels-idx1-ubyte",
                idx(&[10], &(0..10).map(|i| (i % 3) as u8).collect::<Vec<_>>()),
            ),
        ];
        for i in 0..self.cases {
            let d = self.dir.join(format!("idx{i}"));
            std::fs::create_dir_all(&d).unwrap();
            let k = self.rng.below(4);
            let zip = i % 3 == 0;
            for (j, (n, b)) in files.iter().enumerate() {
                let body = if j == k {
                    mutate(b, b, &mut self.rng)
                } else {
                    b.clone()
                };
                if zip {
                    std::fs::write(d.join(format!("{n}.gz")), gz(&body)).unwrap();
                } else {
                    std::fs::write(d.join(n), body).unwrap();
                }
            }
            let args = vec!["data".into(), "info".into(), format!("idx:{}", d.display())];
            run_case(&self.bin, &args, self.timeout, Expect::Either, &mut t);
            let _ = std::fs::remove_dir_all(&d);
        }
        ("data info idx:DIR (one IDX file mutated)", t)
    }

    /// Family 3: Image archives: a mutated tar (plain or gzip) of a two-class PNG folder, read by
    /// `data info`.
    fn image_archives(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let tar_base = {
            let mut b = tar::Builder::new(Vec::new());
            for (split, class, v) in [
                ("train", "a", 10u8),
                ("train", "b", 200),
                ("test", "a", 12),
                ("test", "b", 190),
            ] {
                let mut png = Vec::new();
                let img = crate_png(v);
                png.extend_from_slice(&img);
                let mut h = tar::Header::new_gnu();
                h.set_size(png.len() as u64);
                h.set_mode(0o644);
                h.set_cksum();
                b.append_data(&mut h, format!("set/{split}/{class}/x.png"), &png[..])
                    .unwrap();
            }
            b.into_inner().unwrap()
        };
        for i in 0..self.cases {
            let bad = mutate(&tar_base, &tar_base, &mut self.rng);
            let gzip = i % 3 == 0;
            let p = self.dir.join(if gzip {
                format!("s{i}.tar.gz")
            } else {
                format!("s{i}.tar")
            });
            std::fs::write(&p, if gzip { gz(&bad) } else { bad }).unwrap();
            let args = vec![
                "data".into(),
                "info".into(),
                format!("images:{}", p.display()),
            ];
            run_case(&self.bin, &args, self.timeout, Expect::Either, &mut t);
        }
        ("data info images:FILE.tar[.gz] (mutated archive)", t)
    }

    /// Family 4: Model artifacts: every mutation (other than whitespace in the JSON header) must be
    /// refused by `evaluate` and `predict`.
    fn model_artifacts(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        for i in 0..self.cases {
            let base = &self.models[i % self.models.len()];
            let mut bad = mutate(base, base, &mut self.rng);
            if bad == *base {
                let k = self.rng.below(bad.len());
                bad[k] ^= 1;
            }
            let p = self.dir.join("bad.safetensors");
            std::fs::write(&p, &bad).unwrap();
            let whitespace_only = bad.len() == base.len()
                && bad
                    .iter()
                    .zip(base)
                    .all(|(x, y)| x == y || (x.is_ascii_whitespace() && y.is_ascii_whitespace()));
            let expect = || {
                if whitespace_only {
                    Expect::Either
                } else {
                    Expect::Refused
                }
            };
            let a = vec![
                "evaluate".into(),
                "--model".into(),
                s(&p),
                "--dataset".into(),
                self.ds.clone(),
            ];
            run_case(&self.bin, &a, self.timeout, expect(), &mut t);
            let a = vec![
                "predict".into(),
                "--model".into(),
                s(&p),
                "--input".into(),
                s(&self.q),
            ];
            run_case(&self.bin, &a, self.timeout, expect(), &mut t);
        }
        ("evaluate/predict --model (mutated artifact)", t)
    }

    /// Family 5: Flags: bad numbers and counts in every numeric flag of calibrate, audit, evaluate,
    /// compare and train.
    fn numeric_flags(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let values = [
            "NaN",
            "inf",
            "-inf",
            "-1",
            "0",
            "-0",
            "1e309",
            "1e-320",
            "4294967295",
            "18446744073709551615",
            "18446744073709551616",
            "",
            "abc",
            "1e300",
            "0x10",
            " 1",
        ];
        let templates: Vec<Vec<String>> = vec![
            "calibrate model-sensitivity --epsilon {} --n 1000 --lambda 0.01",
            "calibrate prediction-sensitivity --epsilon 1 --budget {} --n 1000 --lambda 0.01",
            "calibrate subsample-aggregate --epsilon 1 --budget 10 --classes {}",
            "calibrate dp-sgd --epsilon 1 --delta {} --n 1000 --batch-size 10 --epochs 1",
            "calibrate dp-sgd --epsilon 1 --delta 1e-5 --n 1000 --batch-size 10 --epochs {}",
            "calibrate model-sensitivity --epsilon 1 --n {} --lambda 0.01",
            "calibrate model-sensitivity --epsilon 1 --n 1000 --lambda {}",
            "audit model-sensitivity --epsilon 1 --trials {}",
            "audit subsample-aggregate --epsilon 1 --budget {} --trials 1000",
            "audit model-sensitivity --epsilon 1 --classes {} --trials 1000",
            "audit model-sensitivity --epsilon 1 --features {} --trials 1000",
            "audit subsample-aggregate --epsilon 1 --teachers {} --trials 1000",
            "audit model-sensitivity --epsilon {} --trials 1000",
            "audit model-sensitivity --epsilon 1 --confidence {} --trials 1000",
            "evaluate --model M --dataset DS --repetitions {}",
            "compare --dataset DS --epsilon 1 --budget 10 --repetitions {}",
            "compare --dataset DS --epsilon {} --budget 10 --repetitions 1",
            "compare --dataset DS --epsilon 1 --budget {} --repetitions 1",
            "train non-private --dataset DS --out O --lambda {}",
            "train prediction-sensitivity --dataset DS --out O --epsilon 1 --budget {}",
            "train subsample-aggregate --dataset DS --out O --epsilon 1 --budget 10 --teachers {}",
            "train model-sensitivity --dataset DS --out O --epsilon {}",
        ]
        .into_iter()
        .map(|t| {
            t.split(' ')
                .map(|w| match w {
                    "M" => s(&self.m0),
                    "DS" => self.ds.clone(),
                    "O" => s(self.dir.join("flag.safetensors")),
                    w => w.to_string(),
                })
                .collect()
        })
        .collect();
        for tpl in &templates {
            for v in values {
                let args: Vec<String> = tpl
                    .iter()
                    .map(|w| if w == "{}" { v.to_string() } else { w.clone() })
                    .collect();
                run_case(&self.bin, &args, self.timeout, Expect::Either, &mut t);
            }
        }
        ("numeric flags of calibrate/audit/evaluate/compare/train", t)
    }

    /// Family 6: Paths: missing files, directories, empty files, /dev/null and the empty path; each
    /// must be refused.
    fn paths(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let empty = self.dir.join("empty");
        std::fs::write(&empty, b"").unwrap();
        let paths = [
            s(self.dir.join("missing")),
            s(&self.dir),
            s(&empty),
            "/dev/null".to_string(),
            String::new(),
        ];
        for p in &paths {
            for args in [
                vec![
                    "evaluate".into(),
                    "--model".into(),
                    p.clone(),
                    "--dataset".into(),
                    self.ds.clone(),
                ],
                vec![
                    "predict".into(),
                    "--model".into(),
                    p.clone(),
                    "--input".into(),
                    s(&self.q),
                ],
                vec![
                    "predict".into(),
                    "--model".into(),
                    s(&self.m0),
                    "--input".into(),
                    p.clone(),
                ],
                vec!["data".into(), "info".into(), format!("csv:{p}")],
                vec!["data".into(), "info".into(), format!("idx:{p}")],
                vec!["data".into(), "info".into(), format!("images:{p}")],
            ] {
                run_case(&self.bin, &args, self.timeout, Expect::Refused, &mut t);
            }
        }
        ("missing/empty/directory paths", t)
    }
}

impl Sweep {
    /// Family 7: hand-made bad inputs, each of which must exit 2: gzip
    /// bombs (an IDX header promising 2 × 10⁹ values over a short payload, counts that
    /// disagree), trailing gzip bytes, one-class data, tab-separated and mixed-delimiter CSVs,
    /// bad query files (`/dev/zero`, a typo in the first row, a trailing comma, mixed
    /// delimiters, an undeclared header) and contradictory or guarantee-less flags.
    fn second_round(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let d = self.dir.join("round2");
        std::fs::create_dir_all(&d).unwrap();
        let w = |name: &str, b: &[u8]| {
            let p = d.join(name);
            std::fs::write(&p, b).unwrap();
            s(p)
        };
        let mut cases = self.round2_idx_sets(&d);
        for (name, text) in [
            ("tabs.csv", "a\tb\tlabel\n1\t2\t0\n3\t4\t1\n".to_string()),
            ("mixed.csv", "1,2,0\n3;4,1\n5\t6,0\n".to_string()),
            (
                "one.csv",
                (0..40).map(|i| format!("{i},{},1\n", i % 5)).collect(),
            ),
        ] {
            let p = w(name, text.as_bytes());
            cases.push(self.train_args(&format!("csv-pixels:{p}"), &[]));
        }
        cases.push(self.train_args(&self.ds.clone(), &["--epsilon", "1"]));
        let mut out_dir = self.train_args(&self.ds.clone(), &[]);
        if let Some(o) = out_dir.last_mut() {
            *o = s(&d);
        }
        cases.push(out_dir);
        // Query files, answered by an unseeded non-private model (predict accepts it).
        let m = s(d.join("np.safetensors"));
        let np = self.train_args(&self.ds.clone(), &["--lambda", "0.01"]);
        let np: Vec<String> = np[..np.len() - 1]
            .iter()
            .cloned()
            .chain([m.clone()])
            .collect();
        let _ = privpred(&self.bin).args(&np).output();
        for q in [
            "/dev/zero".to_string(),
            w("typo.csv", b"10,20,x30,40\n1,2,3,4\n"),
            w("comma.csv", b"10,20,30,40,\n"),
            w("mixq.csv", b"10,20;30\t40\n"),
            w("head.csv", b"a,b,c,d\n10,20,30,40\n"),
        ] {
            cases.push(
                ["predict", "--model", &m, "--input", &q]
                    .map(String::from)
                    .to_vec(),
            );
        }
        for m in [s(d.join("missing.safetensors")), s(&d)] {
            cases.push(
                ["predict", "--model", &m, "--input", &s(&self.q)]
                    .map(String::from)
                    .to_vec(),
            );
            cases.push(
                ["evaluate", "--model", &m, "--dataset", &self.ds]
                    .map(String::from)
                    .to_vec(),
            );
        }
        // serve: refusals come before the socket is bound (a started server is a HANG).
        let method = serde_json::to_value(privpred_core::Method::PredictionSensitivity).unwrap();
        let fixture = serde_json::json!({"privpred_test_fixture": true, "method": method,
            "budget": 10, "epsilon": 1.0, "delta": 1e-5, "input_dim": 4, "classes": 3,
            "sigma": 0.0, "seed": 7});
        let fx = w("zero.fixture.json", fixture.to_string().as_bytes());
        let mut good = fixture.clone();
        good["sigma"] = 0.5.into();
        let gx = w("good.fixture.json", good.to_string().as_bytes());
        let serve = |m: &str, extra: &[&str]| -> Vec<String> {
            [
                "serve",
                "--model",
                m,
                "--listen",
                "127.0.0.1:0",
                "--init-ledger",
            ]
            .iter()
            .chain(extra)
            .map(|x| x.to_string())
            .collect()
        };
        cases.push(serve(&gx, &["--max-body-bytes", "0"]));
        cases.push(serve(&gx, &["--share-answer-store", "--no-answer-store"]));
        cases.push(serve(&fx, &[]));
        for a in &cases {
            run_case(&self.bin, a, self.timeout, Expect::Usage, &mut t);
        }
        (
            "hand-made bad inputs (gzip bombs, query files, delimiters, one class, flags)",
            t,
        )
    }

    /// The IDX sets of [`Sweep::second_round`]: a gzip bomb whose counts disagree, a label file
    /// with trailing bytes after its gzip data, one-class labels; `train` arguments for each.
    fn round2_idx_sets(&self, d: &Path) -> Vec<Vec<String>> {
        let mut cases = Vec::new();
        // IDX sets: [train images, train labels, test images, test labels].
        let bomb = gz(&idx(&[2_730_000, 28, 28], &vec![0; 1 << 20]));
        let labels = idx(&[20], &[0, 1].repeat(10));
        let mut trailing = gz(&labels);
        trailing.extend_from_slice(b"garbage");
        let one_class = idx(&[20], &[1; 20]);
        let images = idx(&[20, 2, 2], &[9; 80]);
        for (k, set) in [
            [&bomb, &labels, &bomb, &labels],
            [&images, &trailing, &images, &labels],
            [&images, &one_class, &images, &one_class],
        ]
        .into_iter()
        .enumerate()
        {
            let sd = d.join(format!("idx{k}"));
            std::fs::create_dir_all(&sd).unwrap();
            for (name, b) in [
                "train-images-idx3-ubyte.gz",
                "train-labels-idx1-ubyte.gz",
                "t10k-images-idx3-ubyte.gz",
                "t10k-labels-idx1-ubyte.gz",
            ]
            .into_iter()
            .zip(set)
            {
                let b = if b.starts_with(&[0x1f, 0x8b]) {
                    b.clone()
                } else {
                    gz(b)
                };
                std::fs::write(sd.join(name), b).unwrap();
            }
            cases.push(self.train_args(&format!("idx:{}", sd.display()), &[]));
        }
        cases
    }

    /// `train non-private --dataset DS EXTRA… --out O`.
    fn train_args(&self, ds: &str, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = ["train", "non-private", "--dataset", ds]
            .map(String::from)
            .to_vec();
        a.extend(extra.iter().map(|x| x.to_string()));
        a.extend(["--out".to_string(), s(self.dir.join("r2.safetensors"))]);
        a
    }
}

/// Prints the table of the families (cases, refused, accepted, failures), with `verbose` why
/// the refused cases were refused, then every failure; returns 1 if any case failed.
fn print_report(report: &[(&str, Tally)], verbose: bool) -> i32 {
    let mut failed = 0;
    println!("| target | cases | refused | accepted | failures |");
    println!("|---|---:|---:|---:|---:|");
    for (name, t) in report {
        println!(
            "| {name} | {} | {} | {} | {} |",
            t.cases,
            t.refused,
            t.accepted,
            t.failures.len()
        );
        failed += t.failures.len();
    }
    if verbose {
        for (name, t) in report {
            println!("\n{name}: why the refused cases were refused");
            for (k, n) in &t.kinds {
                println!("  {n:5}  {k}");
            }
        }
    }
    for (_, t) in report {
        for f in &t.failures {
            println!("FAIL {f}");
        }
    }
    i32::from(failed > 0)
}
