//! Load benchmark for the prediction service: answers per second and request latency
//! (p50/p99) with the durable budget ledger on, for SQLite and PostgreSQL, with batching.
//!
//! The client (this process, N keep-alive connections on threads) and the server (a second
//! process) talk over loopback. By default the server is this binary re-executed in server
//! mode with a linear TEST FIXTURE model (784 raw features → unit ball → θᵀx, 10 classes,
//! Gaussian noise per answer, as prediction sensitivity), a budget of 10⁹ answers and the
//! answer store on; every row is distinct, so every answer spends one durably recorded unit.
//! Use `--addr HOST:PORT` to load an already running `privpred serve` instead.
//!
//! ```text
//! cargo run --release -p privpred-serve --example loadgen -- \
//!     [--ledger sqlite|postgres|both] [--pg CONNSTR] [--clients 8] [--batch 64] \
//!     [--seconds 10] [--dim 784] [--addr HOST:PORT] [--start N]
//! ```
//! `--pg` defaults to `$PRIVPRED_TEST_POSTGRES`. `--start N` offsets the generated rows (use
//! different offsets for repeated runs against one `--addr` server, or rows repeat and are
//! answered from the answer store without spending).

use privpred_answer::LedgerSpec;
use privpred_core::Method;
use privpred_serve::client::Client;
use privpred_serve::{FixtureModel, FixtureSpec, ServeConfig};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Opts {
    ledgers: Vec<String>,
    pg: Option<String>,
    clients: usize,
    batch: usize,
    seconds: f64,
    dim: usize,
    addr: Option<SocketAddr>,
    start: u64,
}

fn parse() -> Opts {
    let mut o = Opts {
        ledgers: vec!["sqlite".into(), "postgres".into()],
        pg: std::env::var("PRIVPRED_TEST_POSTGRES").ok(),
        clients: 8,
        batch: 64,
        seconds: 10.0,
        dim: 784,
        addr: None,
        start: 0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--ledger" => {
                o.ledgers = if v == "both" {
                    vec!["sqlite".into(), "postgres".into()]
                } else {
                    vec![v]
                }
            }
            "--pg" => o.pg = Some(v),
            "--clients" => o.clients = v.parse().expect("--clients N"),
            "--batch" => o.batch = v.parse().expect("--batch N"),
            "--seconds" => o.seconds = v.parse().expect("--seconds S"),
            "--dim" => o.dim = v.parse().expect("--dim D"),
            "--addr" => o.addr = Some(v.parse().expect("--addr HOST:PORT")),
            "--start" => o.start = v.parse().expect("--start N"),
            "--cargo-bench" | "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    o
}

/// Server mode: `loadgen --serve MODEL LEDGER`.
fn serve_mode(model: &str, ledger: &str) {
    let bytes = std::fs::read(model).expect("model file");
    let m = Arc::new(FixtureModel::from_bytes(&bytes).expect("fixture"));
    let mut cfg = ServeConfig::new("127.0.0.1:0");
    cfg.ledger = Some(LedgerSpec::parse(ledger).expect("ledger"));
    cfg.max_batch = 4096;
    // Each run uses a fresh model tag and ledger: create its budget record deliberately.
    cfg.init_ledger = true;
    privpred_serve::run_until_signal(m, cfg, |addr, notes| {
        for n in notes {
            eprintln!("server: {n}");
        }
        println!("listening on http://{addr}");
    })
    .expect("server");
}

/// Row `slot`'s fixed tail (features 1..dim as MNIST-like integer pixels), pre-serialised.
fn tails(dim: usize, slots: usize) -> Vec<String> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..slots)
        .map(|_| {
            (1..dim)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Mostly zeros like MNIST, some ink.
                    let v = state % 1000;
                    if v < 800 {
                        "0".to_string()
                    } else {
                        (v % 256).to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

struct Result {
    answers: u64,
    requests: u64,
    refused: u64,
    latencies: Vec<f64>,
    elapsed: f64,
}

fn run_load(addr: SocketAddr, o: &Opts) -> Result {
    let tails = Arc::new(tails(o.dim, o.batch));
    let deadline = Instant::now() + Duration::from_secs_f64(o.seconds);
    let t0 = Instant::now();
    let handles: Vec<_> = (0..o.clients)
        .map(|t| {
            let tails = tails.clone();
            let batch = o.batch;
            let start = o.start;
            assert!(
                o.clients <= 16,
                "at most 16 clients (distinct rows need first features < 2^24)"
            );
            std::thread::spawn(move || {
                let mut c = Client::new(addr, None);
                let mut lat = Vec::new();
                let (mut answers, mut requests, mut refused) = (0u64, 0u64, 0u64);
                // Distinct first feature per row (exact in f32, small enough to stay distinct after scaling): every row is a new query.
                let mut counter = start + t as u64 * 100_000 + 1;
                let mut body = String::with_capacity(batch * tails[0].len() + 64 * batch);
                while Instant::now() < deadline {
                    body.clear();
                    body.push_str("{\"inputs\":[");
                    for (k, tail) in tails.iter().enumerate() {
                        if k > 0 {
                            body.push(',');
                        }
                        counter += 1;
                        body.push('[');
                        body.push_str(&counter.to_string());
                        body.push(',');
                        body.push_str(tail);
                        body.push(']');
                    }
                    body.push_str("]}");
                    let s = Instant::now();
                    let r = c.post_json("/v1/predict", &body).expect("request");
                    lat.push(s.elapsed().as_secs_f64());
                    requests += 1;
                    match r.status {
                        200 => answers += batch as u64,
                        429 => refused += 1,
                        st => panic!("status {st}: {}", r.body),
                    }
                }
                (answers, requests, refused, lat)
            })
        })
        .collect();
    let mut res = Result {
        answers: 0,
        requests: 0,
        refused: 0,
        latencies: Vec::new(),
        elapsed: 0.0,
    };
    for h in handles {
        let (a, r, f, l) = h.join().unwrap();
        res.answers += a;
        res.requests += r;
        res.refused += f;
        res.latencies.extend(l);
    }
    res.elapsed = t0.elapsed().as_secs_f64();
    res.latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    res
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn report(label: &str, o: &Opts, r: &Result) {
    println!(
        "{label:<10} clients={:<3} batch={:<5} answers/s={:>9.0} requests/s={:>7.0} p50={:>7.2}ms p99={:>7.2}ms answers={} refused={}",
        o.clients,
        o.batch,
        r.answers as f64 / r.elapsed,
        r.requests as f64 / r.elapsed,
        pct(&r.latencies, 0.5) * 1e3,
        pct(&r.latencies, 0.99) * 1e3,
        r.answers,
        r.refused
    );
}

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve") {
        serve_mode(&args[2], &args[3]);
        return;
    }
    let o = parse();
    if let Some(addr) = o.addr {
        let r = run_load(addr, &o);
        report("external", &o, &r);
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for ledger in &o.ledgers {
        let mut spec = FixtureSpec::new(Method::PredictionSensitivity, 1_000_000_000, o.dim, 10);
        spec.tag = format!("loadgen-{}-{}", std::process::id(), ledger);
        let model = dir.path().join(format!("{ledger}.fixture.json"));
        std::fs::write(&model, spec.to_json()).unwrap();
        let ledger_spec = match ledger.as_str() {
            "sqlite" => format!("sqlite:{}", dir.path().join("ledger.sqlite").display()),
            "postgres" => match &o.pg {
                Some(pg) => pg.clone(),
                None => {
                    eprintln!("skipping postgres: set --pg or PRIVPRED_TEST_POSTGRES");
                    continue;
                }
            },
            other => panic!("--ledger sqlite|postgres|both, not {other}"),
        };
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--serve")
            .arg(&model)
            .arg(&ledger_spec)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("listening on http://")
            .expect("server address")
            .parse()
            .unwrap();
        let r = run_load(addr, &o);
        report(ledger, &o, &r);
        // Cross-check: the ledger recorded every released answer.
        let id = privpred_serve::model::sha256_hex(&std::fs::read(&model).unwrap());
        let st = privpred_answer::ledger::blocking::read_state(
            &LedgerSpec::parse(&ledger_spec).unwrap(),
            &id,
        )
        .unwrap()
        .unwrap();
        println!(
            "{:<10} ledger records {} spent (client counted {})",
            "", st.spent, r.answers
        );
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let _ = child.wait();
    }
}
