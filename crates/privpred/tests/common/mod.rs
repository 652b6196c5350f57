//! Helpers shared by the CLI integration tests: run the `privpred` binary built for this test
//! run and check its exit status, output and error text. Each test file uses a subset.
#![allow(dead_code)]

use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the `privpred` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_privpred");

/// The config directory of every `privpred` the tests run (`XDG_CONFIG_HOME`): the default
/// key directory that `train` creates on first use and `predict`/`serve`/`evaluate` trust
/// lives under it, never in the real home.
pub const CONFIG_HOME: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/privpred-config");

/// The default key directory of the tests' `privpred` runs.
pub fn key_dir() -> PathBuf {
    Path::new(CONFIG_HOME).join("privpred").join("keys")
}

/// A `privpred` command with the tests' config directory.
pub fn bin() -> Command {
    let mut c = Command::new(BIN);
    c.env("XDG_CONFIG_HOME", CONFIG_HOME);
    c
}

/// Runs `privpred ARGS` to completion.
pub fn privpred(args: &[&str]) -> Output {
    bin().args(args).output().expect("run privpred")
}

/// Runs `privpred ARGS` with extra environment variables.
pub fn privpred_env<V: AsRef<OsStr>>(args: &[&str], env: &[(&str, V)]) -> Output {
    let mut c = bin();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run privpred")
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// (exit code, stdout, stderr); -1 when killed by a signal.
pub fn outcome(o: &Output) -> (i32, String, String) {
    (o.status.code().unwrap_or(-1), stdout(o), stderr(o))
}

/// (exit code, stdout, stderr) of `privpred ARGS`.
pub fn capture(args: &[&str]) -> (i32, String, String) {
    outcome(&privpred(args))
}

/// (exit code, stdout, stderr) of `privpred ARGS` with extra environment variables.
pub fn capture_env<V: AsRef<OsStr>>(args: &[&str], env: &[(&str, V)]) -> (i32, String, String) {
    outcome(&privpred_env(args, env))
}

/// (exit code, stderr) of `privpred ARGS`.
pub fn code(args: &[&str]) -> (i32, String) {
    let o = privpred(args);
    (o.status.code().unwrap_or(-1), stderr(&o))
}

/// Standard output of `privpred ARGS`, which must succeed.
pub fn ok(args: &[&str]) -> String {
    let o = privpred(args);
    assert!(
        o.status.success(),
        "privpred {args:?} failed: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    stdout(&o)
}

/// The one JSON object a successful run printed.
pub fn json_of(o: &Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// The one JSON object `privpred ARGS` printed; the run must succeed.
pub fn json(args: &[&str]) -> Value {
    let o = privpred(args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    json_of(&o)
}

/// `privpred ARGS` is a usage error: exit code 2, `needle` named on stderr, no panic, no NaN
/// printed.
pub fn assert_bad(args: &[&str], needle: &str) {
    let o = privpred(args);
    assert_eq!(o.status.code(), Some(2), "{args:?} should exit 2");
    let err = stderr(&o);
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} should name {needle}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(!stdout(&o).contains("NaN"));
}

/// The CIFAR-10 JPEG copy through the normal resolution order (`$PRIVPRED_DATA_DIR`, the
/// cache, `shared/data` beside the repository), or `None` after one printed skip line naming
/// `test` (a test failure instead when `PRIVPRED_REQUIRE_DATA=1`): see
/// `privpred_data::testdata`.
pub fn cifar_or_skip(test: &str) -> Option<PathBuf> {
    privpred_data::testdata::cifar10_jpeg_or_skip(test)
}

/// 30 training and 20 test images per class of the CIFAR-10 JPEG copy as an image folder
/// (`images:DIR`) under `dir`, extracted with the system `tar`; `None` (the test skips, see
/// [`cifar_or_skip`]) when the copy is absent.
pub fn small_cifar(dir: &Path, test: &str) -> Option<PathBuf> {
    let tarball = cifar_or_skip(test)?;
    let dst = dir.join("cifar-small");
    std::fs::create_dir_all(&dst).unwrap();
    let o = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dst)
        .args(["--wildcards", "train/*/00[0-2]?.jpg", "test/*/00[0-1]?.jpg"])
        .output()
        .expect("the system tar runs");
    assert!(o.status.success(), "tar: {}", stderr(&o));
    Some(dst)
}

/// The toy set of the train/predict/serve tests, written to `dir/toy.csv`: `rows` rows of 8
/// pixel-like features (0..255) in 3 well-separated classes (class `i % 3`), label last, from a
/// fixed linear congruential sequence (seed 777), so every test file trains on the same data.
pub fn toy_csv(dir: &Path, rows: usize) -> PathBuf {
    let p = dir.join("toy.csv");
    let mut s = String::from("f0,f1,f2,f3,f4,f5,f6,f7,label\n");
    let mut state = 777u64;
    for i in 0..rows {
        let y = i % 3;
        let row: Vec<String> = (0..8)
            .map(|j| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((state >> 33) % 60) as u32 + if j % 3 == y { 180 } else { 0 }).to_string()
            })
            .collect();
        s.push_str(&format!("{},{}\n", row.join(","), y));
    }
    std::fs::write(&p, s).unwrap();
    p
}

/// [`toy_csv`] as the `--dataset` argument (`csv-pixels:PATH`: pixel-like values read as an
/// image set, scaled by 1/255; a `csv:` table would need a schema).
pub fn toy_dataset(dir: &Path, rows: usize) -> String {
    format!("csv-pixels:{}", toy_csv(dir, rows).display())
}

/// A small set written to `dir/d.csv` and returned as the `--dataset` argument
/// (`csv-pixels:PATH`): `rows` rows of `cols` pixel-like values (37i + 11j) mod 50, plus 150 in
/// column `i % 3`, label `i % 3` last (3 well-separated classes); with a header line `a,b,…,label`
/// when `header`.
pub fn pixel_set(dir: &Path, rows: usize, cols: usize, header: bool) -> String {
    let mut s = String::new();
    if header {
        for j in 0..cols {
            s.push(char::from(b'a' + j as u8));
            s.push(',');
        }
        s.push_str("label\n");
    }
    for i in 0..rows {
        let y = i % 3;
        let v: Vec<String> = (0..cols)
            .map(|j| ((i * 37 + j * 11) % 50 + if j == y { 150 } else { 0 }).to_string())
            .collect();
        s.push_str(&format!("{},{y}\n", v.join(",")));
    }
    let p = dir.join("d.csv");
    std::fs::write(&p, s).unwrap();
    format!("csv-pixels:{}", p.display())
}

/// `privpred compare` on digits at ε = 1, δ = 1e-5, B = 10 with 16 teachers and
/// `repetitions` repetitions, followed by `extra`.
pub fn digits_compare<'a>(repetitions: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "compare",
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--budget",
        "10",
        "--teachers",
        "16",
        "--repetitions",
        repetitions,
    ];
    args.extend_from_slice(extra);
    args
}

/// `privpred train METHOD --dataset DATASET --out DIR/NAME.safetensors ARGS…`, which must
/// succeed; returns the artifact's path and the command's standard output. A `csv-pixels:`
/// set of this module ([`toy_dataset`], [`pixel_set`]: 3 classes) has its classes declared
/// (`--classes 3`, a public parameter) unless `args` declare them.
pub fn train_into(
    dir: &Path,
    name: &str,
    method: &str,
    dataset: &str,
    args: &[&str],
) -> (PathBuf, String) {
    let out = dir.join(format!("{name}.safetensors"));
    let mut all = vec!["train", method, "--dataset", dataset];
    if dataset.starts_with("csv-pixels:") && !args.contains(&"--classes") {
        all.extend_from_slice(&["--classes", "3"]);
    }
    all.push("--out");
    all.push(out.to_str().expect("a UTF-8 temporary path"));
    all.extend_from_slice(args);
    let stdout = ok(&all);
    (out, stdout)
}

/// The budget record of a model in its default ledger (`privpred ledger show --model`).
pub fn ledger_record(model: &Path) -> Value {
    let v: Value = serde_json::from_str(&ok(&[
        "ledger",
        "show",
        "--model",
        model.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    v["records"][0].clone()
}

/// Rewrites the artifact `src` into `dst` with `edit` applied to its metadata (`model` and
/// `extra` as JSON, the others as text) and the file's checksum recomputed as the writer
/// computes it (`privpred_data::artifact::checksum`): the weights are unchanged. Linear and
/// deep-model artifacts alike.
///
/// The edited payload is put back into the model file's envelope under its header, sealed
/// and signed again with the tests' own keys (as an owner who signed a bad file would), so
/// that what it reaches is the payload's own checks and the guarantee's re-derivation.
pub fn tamper(
    src: &Path,
    dst: &Path,
    edit: impl Fn(&mut Value, &mut Value, &mut std::collections::HashMap<String, String>),
) {
    let (envelope_header, bytes) = open_envelope(src);
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut meta: std::collections::HashMap<String, String> =
        serde_json::from_value(header.remove("__metadata__").unwrap()).unwrap();
    let json_of = |k: &str| {
        meta.get(k)
            .map_or(Value::Null, |e| serde_json::from_str(e).unwrap())
    };
    let mut model = json_of("model");
    let mut extra = json_of("extra");
    edit(&mut model, &mut extra, &mut meta);
    for (k, v) in [("model", model), ("extra", extra)] {
        if meta.contains_key(k) || !v.is_null() {
            meta.insert(k.into(), v.to_string());
        }
    }
    type Tensor<'a> = (String, String, Vec<usize>, &'a [u8]);
    let tensors: Vec<Tensor<'_>> = header
        .iter()
        .map(|(name, t)| {
            let shape = serde_json::from_value(t["shape"].clone()).unwrap();
            let o: Vec<usize> = serde_json::from_value(t["data_offsets"].clone()).unwrap();
            let dtype = t["dtype"].as_str().unwrap().to_string();
            (name.clone(), dtype, shape, &data[o[0]..o[1]])
        })
        .collect();
    let refs: Vec<privpred_data::artifact::TensorRef<'_>> = tensors
        .iter()
        .map(|(name, dtype, shape, d)| (name.as_str(), dtype.as_str(), shape.as_slice(), *d))
        .collect();
    meta.remove(privpred_data::artifact::CHECKSUM_KEY);
    let sum = privpred_data::artifact::checksum(&meta, &refs);
    meta.insert(privpred_data::artifact::CHECKSUM_KEY.into(), sum);
    header.insert("__metadata__".into(), serde_json::to_value(&meta).unwrap());
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    std::fs::write(dst, rewrap(envelope_header, &out)).unwrap();
}

/// The tests' signing and sealing keys (the default key set of their `privpred` runs).
pub fn test_keys() -> (privpred_release::SigningKey, privpred_release::SealingKey) {
    let kd = privpred_release::KeyDir(key_dir());
    (
        privpred_release::SigningKey::read(&kd.signing()).unwrap(),
        privpred_release::SealingKey::read(&kd.sealing()).unwrap(),
    )
}

/// A model file's envelope header and its payload (the family's safetensors bytes),
/// unsealed with the tests' keys.
pub fn open_envelope(path: &Path) -> (privpred_release::Header, Vec<u8>) {
    let file = std::fs::read(path).unwrap();
    let parsed = privpred_release::envelope::parse(path, &file).unwrap();
    let (_, sealing) = test_keys();
    let payload = privpred_release::envelope::unseal(path, &parsed, Some(&sealing)).unwrap();
    (parsed.header, payload)
}

/// The payload (safetensors bytes) of a model file.
pub fn payload(path: &Path) -> Vec<u8> {
    open_envelope(path).1
}

/// `payload` wrapped under `header` again, sealed when the header was and signed with the
/// tests' key.
pub fn rewrap(header: privpred_release::Header, payload: &[u8]) -> Vec<u8> {
    let (signing, sealing) = test_keys();
    let sealed = header.sealed.is_some();
    privpred_release::envelope::encode(header, payload, Some(&signing), sealed.then_some(&sealing))
        .unwrap()
}

/// `privpred serve` running in the background; killed on drop.
pub struct Serve {
    /// The server process.
    pub child: std::process::Child,
    /// The address it listens on.
    pub addr: std::net::SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `privpred serve ARGS` and waits for its `listening on` line; a server that does not
/// start gives its exit code and stderr.
pub fn spawn_serve(args: &[&str]) -> Result<Serve, (i32, String)> {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = bin()
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if let Some(a) = line.trim().strip_prefix("listening on http://") {
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        return Ok(Serve {
            child,
            addr: a.parse().unwrap(),
        });
    }
    let o = child.wait_with_output().unwrap();
    Err((
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// [`spawn_serve`] on `model` on a free loopback port with `extra` flags; panics with the
/// server's stderr if it does not start.
pub fn serve_model(model: &Path, extra: &[&str]) -> Serve {
    let mut a = vec![
        "--model",
        model.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ];
    a.extend_from_slice(extra);
    spawn_serve(&a).unwrap_or_else(|(c, e)| panic!("serve did not start (exit {c}): {e}"))
}

/// Runs `privpred ARGS`, killing it after `secs`: (exit code, stderr), or None on a hang.
pub fn bounded(args: &[&str], secs: u64) -> Option<(i32, String)> {
    let mut c = bin()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(secs) {
        if let Some(st) = c.try_wait().unwrap() {
            let mut e = String::new();
            std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut e).unwrap();
            return Some((st.code().unwrap_or(-1), e));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
    None
}

/// One row of the schema tables the table tests write: (age, colour, income, id, outcome),
/// under the header `age,colour,income,id,outcome`.
pub type TableRow = (f64, &'static str, f64, i64, &'static str);

/// The table as CSV with its header line.
pub fn write_table_csv(path: &Path, rows: &[TableRow]) {
    let mut s = String::from("age,colour,income,id,outcome\n");
    for (a, c, inc, id, y) in rows {
        s.push_str(&format!("{a},{c},{inc},{id},{y}\n"));
    }
    std::fs::write(path, s).unwrap();
}

/// The table as a Parquet file (snappy-compressed, as pandas writes it).
pub fn write_table_parquet(path: &Path, rows: &[TableRow]) {
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let schema = std::sync::Arc::new(
        parquet::schema::parser::parse_message_type(
            "message t { REQUIRED DOUBLE age; REQUIRED BYTE_ARRAY colour (UTF8); REQUIRED DOUBLE income; REQUIRED INT64 id; REQUIRED BYTE_ARRAY outcome (UTF8); }",
        )
        .unwrap(),
    );
    let props = std::sync::Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let f = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(f, schema, props).unwrap();
    let mut rg = w.next_row_group().unwrap();
    let text = |v: Vec<&str>| -> Vec<ByteArray> { v.into_iter().map(ByteArray::from).collect() };
    let mut k = 0;
    while let Some(mut col) = rg.next_column().unwrap() {
        match k {
            0 | 2 => {
                let v: Vec<f64> = rows
                    .iter()
                    .map(|r| if k == 0 { r.0 } else { r.2 })
                    .collect();
                col.typed::<DoubleType>()
                    .write_batch(&v, None, None)
                    .unwrap();
            }
            3 => {
                let v: Vec<i64> = rows.iter().map(|r| r.3).collect();
                col.typed::<Int64Type>()
                    .write_batch(&v, None, None)
                    .unwrap();
            }
            _ => {
                let v = text(
                    rows.iter()
                        .map(|r| if k == 1 { r.1 } else { r.4 })
                        .collect(),
                );
                col.typed::<ByteArrayType>()
                    .write_batch(&v, None, None)
                    .unwrap();
            }
        }
        col.close().unwrap();
        k += 1;
    }
    rg.close().unwrap();
    w.close().unwrap();
}
