//! A bounded fuzz run of the HTTP surface: generated malformed and hostile
//! requests — raw bytes over TCP — against a live server with a real SQLite ledger. For every
//! case: the server does not crash (it answers `/healthz` afterwards), the reply is a
//! well-formed HTTP/1.1 response (or, for input that is not HTTP at all, a closed
//! connection), a JSON error body for every 4xx/5xx that the service produced, and **no
//! budget is spent by a refused request** (the ledger's `spent` is read after each case).
//!
//! Deterministic by default (seed 20); `PRIVPRED_FUZZ_SEED` and `PRIVPRED_FUZZ_CASES` (default
//! 3000) change the seed and the number of cases; `PRIVPRED_FUZZ_SECS` (default 120) bounds the
//! run. The counts per family and per status are printed (`--nocapture`).

use privpred_answer::LedgerSpec;
use privpred_answer::ledger::admin;
use privpred_core::Method;
use privpred_serve::{FixtureModel, FixtureSpec, ServeConfig, ServedModel, Server};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIM: usize = 4;

/// SplitMix64: a small seeded generator (the cases must be reproducible from the seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn chance(&mut self, p_percent: u64) -> bool {
        self.below(100) < p_percent
    }
}

fn valid_body(rng: &mut Rng, rows: usize) -> String {
    let rows: Vec<String> = (0..rows)
        .map(|_| {
            let r: Vec<String> = (0..DIM)
                .map(|_| format!("{}", rng.below(4096) as f64 / 8192.0))
                .collect();
            format!("[{}]", r.join(","))
        })
        .collect();
    format!("{{\"inputs\":[{}]}}", rows.join(","))
}

/// A request with a Content-Length body.
fn request(method: &str, path: &str, headers: &[(String, String)], body: &[u8]) -> Vec<u8> {
    let mut s = format!("{method} {path} HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n");
    for (k, v) in headers {
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut b = s.into_bytes();
    b.extend_from_slice(body);
    b
}

fn json_ct() -> Vec<(String, String)> {
    vec![("Content-Type".into(), "application/json".into())]
}

struct Case {
    family: &'static str,
    bytes: Vec<u8>,
    /// Close the write side after sending (a truncated body then reads EOF at once).
    half_close: bool,
    /// A valid request: must be answered 200 (given budget).
    must_succeed: bool,
    /// Rows in the request if valid (the most it may spend).
    rows: u64,
}

fn mutate(rng: &mut Rng, s: &[u8]) -> Vec<u8> {
    let mut b = s.to_vec();
    for _ in 0..=rng.below(4) {
        if b.is_empty() {
            break;
        }
        let i = rng.below(b.len() as u64) as usize;
        match rng.below(4) {
            0 => b[i] = rng.next() as u8,
            1 => {
                b.remove(i);
            }
            2 => b.insert(i, *rng.pick(b"[]{},:\"0123456789.eE-+ntf\\\x00\xff")),
            _ => b.truncate(i),
        }
    }
    b
}

fn generate(rng: &mut Rng) -> Case {
    let case = |family, bytes, half_close| Case {
        family,
        bytes,
        half_close,
        must_succeed: false,
        rows: 0,
    };
    match rng.below(16) {
        0 => {
            let m = rng.pick(&[
                "PUT",
                "DELETE",
                "PATCH",
                "OPTIONS",
                "TRACE",
                "CONNECT",
                "FOO",
                "get",
                "P\x00ST",
                "POSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTPOST",
                "",
                "GET /x",
            ]);
            let body = valid_body(rng, 1);
            case(
                "bad method",
                request(m, "/v1/predict", &json_ct(), body.as_bytes()),
                false,
            )
        }
        1 => {
            let n = [9_000usize, 17_000, 64_000, 300_000][rng.below(4) as usize];
            let mut h = json_ct();
            h.push(("X-Big".into(), "a".repeat(n)));
            let body = valid_body(rng, 1);
            case(
                "huge header",
                request("POST", "/v1/predict", &h, body.as_bytes()),
                false,
            )
        }
        2 => {
            let n = [65usize, 100, 1000, 5000][rng.below(4) as usize];
            let mut h = json_ct();
            for i in 0..n {
                h.push((format!("X-H{i}"), "v".into()));
            }
            let body = valid_body(rng, 1);
            case(
                "many headers",
                request("POST", "/v1/predict", &h, body.as_bytes()),
                false,
            )
        }
        3 => {
            let ct = rng.pick(&[
                "text/plain",
                "text/plain; charset=utf-8",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=zz",
                "application/jsonp",
                "json",
                "",
                "application/json\u{0}",
                "*/*",
            ]);
            let body = valid_body(rng, 1);
            case(
                "wrong content type",
                request(
                    "POST",
                    "/v1/predict",
                    &[("Content-Type".into(), ct.to_string())],
                    body.as_bytes(),
                ),
                false,
            )
        }
        4 => {
            let body = valid_body(rng, 2);
            let mut b = request("POST", "/v1/predict", &json_ct(), body.as_bytes());
            let cut = rng.below(body.len() as u64) as usize;
            b.truncate(b.len() - body.len() + cut);
            case("truncated body", b, true)
        }
        5 => {
            let declared = *rng.pick(&[
                "99999999999",
                "18446744073709551616",
                "-1",
                "1e3",
                "0x10",
                "100000000",
            ]);
            let mut s = format!(
                "POST /v1/predict HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
            )
            .into_bytes();
            s.extend_from_slice(b"{\"inputs\":[[0,0,0,0]]}");
            case("oversized or bad length", s, true)
        }
        6 => {
            // chunked body larger than the limit, or malformed chunks
            let mut s = b"POST /v1/predict HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            match rng.below(3) {
                0 => {
                    for _ in 0..40 {
                        s.extend_from_slice(b"4000\r\n");
                        s.extend_from_slice(&vec![b' '; 0x4000]);
                        s.extend_from_slice(b"\r\n");
                    }
                    s.extend_from_slice(b"0\r\n\r\n");
                }
                1 => s.extend_from_slice(b"zz\r\nabc\r\n0\r\n\r\n"),
                _ => s.extend_from_slice(b"ffffffffffffffffff\r\nabc"),
            }
            case("chunked", s, true)
        }
        7 => {
            let n = 1 + rng.below(3) as usize;
            let good = valid_body(rng, n);
            let body = mutate(rng, good.as_bytes());
            case(
                "mutated JSON",
                request("POST", "/v1/predict", &json_ct(), &body),
                false,
            )
        }
        8 => {
            let d = [200usize, 5_000, 100_000][rng.below(3) as usize];
            let body = if rng.chance(50) {
                format!("{{\"inputs\":{}{}}}", "[".repeat(d), "]".repeat(d))
            } else {
                format!("{}{}", "{\"a\":".repeat(d), "}".repeat(d))
            };
            case(
                "deep nesting",
                request("POST", "/v1/predict", &json_ct(), body.as_bytes()),
                false,
            )
        }
        9 => {
            let v = rng.pick(&[
                "1e400",
                "-1e400",
                "1e39",
                "123456789012345678901234567890123456789",
                "1e-400",
                "NaN",
                "Infinity",
                "-Infinity",
                "\"NaN\"",
                "null",
                "true",
                "0x10",
                "1_000",
                "--1",
                "1.",
                ".5",
                "3.4028236e38",
            ]);
            let body = format!("{{\"inputs\":[[{v},0,0,0]]}}");
            case(
                "extreme number",
                request("POST", "/v1/predict", &json_ct(), body.as_bytes()),
                false,
            )
        }
        10 => {
            let body = rng
                .pick(&[
                    "\u{feff}{\"inputs\":[[0,0,0,0]]}",
                    "{\"inpüts\":[[0,0,0,0]]}",
                    "{\"inputs\":[[0,0,0,0]],\"\u{202e}x\":1}",
                    "{\"inputs\":\"\u{1F600}\"}",
                    "{\"inputs\":[[0,0,0,0]],\"inputs\":[[1,1,1,1]]}",
                ])
                .as_bytes()
                .to_vec();
            let mut b = body;
            if rng.chance(30) {
                b.extend_from_slice(b"\xff\xfe\xc0\x80");
            }
            case(
                "unicode",
                request("POST", "/v1/predict", &json_ct(), &b),
                false,
            )
        }
        11 => {
            let body = rng.pick(&[
                "{}",
                "[]",
                "{\"inputs\":[]}",
                "{\"inputs\":[[]]}",
                "{\"inputs\":[[0,0,0]]}",
                "{\"inputs\":[[0,0,0,0,0]]}",
                "{\"inputs\":[[\"0\",0,0,0]]}",
                "{\"inputs\":[0,0,0,0]}",
                "{\"inputs\":null}",
                "{\"inputs\":[[0,0,0,0]],\"extra\":1}",
                "null",
                "",
            ]);
            case(
                "wrong shape",
                request("POST", "/v1/predict", &json_ct(), body.as_bytes()),
                false,
            )
        }
        12 => {
            let raws: [&[u8]; 14] = [
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
                b"GET / HTTP/1.1\r\n\r\n",
                b"GET /healthz HTTP/1.0\r\n\r\n",
                b"GET http://evil/v1/model HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET /v1/model?x=\xff HTTP/1.1\r\nHost: x\r\n\r\n",
                b"\r\n\r\n\r\n",
                b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
                b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                b"POST /v1/predict HTTP/9.9\r\nHost: x\r\n\r\n",
                b"POST /v1/predict\r\n\r\n",
                b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET /v1/predict HTTP/1.1\r\nHost: x\r\n\r\n",
                b"POST /openapi.json HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            ];
            let raw = *rng.pick(&raws);
            case("protocol", raw.to_vec(), true)
        }
        13 => {
            let n = rng.below(2048) as usize;
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            case("random bytes", junk, true)
        }
        14 => {
            let rows = 1 + rng.below(1100) as usize; // sometimes over --max-batch (1024)
            let body = valid_body(rng, rows);
            case(
                "batch size",
                request("POST", "/v1/predict", &json_ct(), body.as_bytes()),
                false,
            )
        }
        _ => {
            let rows = 1 + rng.below(4);
            let body = valid_body(rng, rows as usize);
            Case {
                family: "valid",
                bytes: request("POST", "/v1/predict", &json_ct(), body.as_bytes()),
                half_close: false,
                must_succeed: true,
                rows,
            }
        }
    }
}

/// Sends a case and reads everything until the server closes (or `wait` passes).
fn exchange(addr: SocketAddr, case: &Case, wait: Duration) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("the server accepts connections");
    s.set_read_timeout(Some(wait)).unwrap();
    s.set_write_timeout(Some(wait)).unwrap();
    let _ = s.write_all(&case.bytes);
    if case.half_close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Parses a response: status, lower-case headers, body. None if not well-formed HTTP/1.1.
/// Status, lower-case headers, body.
type Parsed = (u16, Vec<(String, String)>, Vec<u8>);

fn parse(resp: &[u8]) -> Option<Parsed> {
    let end = resp.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&resp[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    if !matches!(parts.next()?, "HTTP/1.1" | "HTTP/1.0") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let mut headers = Vec::new();
    for l in lines {
        let (k, v) = l.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let body = resp[end + 4..].to_vec();
    if let Some((_, len)) = headers.iter().find(|(k, _)| k == "content-length")
        && body.len() != len.parse::<usize>().ok()?
    {
        return None;
    }
    Some((status, headers, body))
}

#[test]
fn hostile_http_requests_never_crash_or_spend() {
    let seed: u64 = std::env::var("PRIVPRED_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let cases: usize = std::env::var("PRIVPRED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let secs: u64 = std::env::var("PRIVPRED_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let dir = tempfile::tempdir().unwrap();
    let spec = LedgerSpec::Sqlite(dir.path().join("fuzz.sqlite"));
    let mut fs = FixtureSpec::new(Method::PredictionSensitivity, 1_000_000_000, DIM, 3);
    fs.tag = format!("fuzz{seed}");
    let model = Arc::new(FixtureModel::from_bytes(fs.to_json().as_bytes()).unwrap());
    let model_id = model.info().model_id.clone();
    let mut cfg = ServeConfig::new("127.0.0.1:0");
    cfg.ledger = Some(spec.clone());
    cfg.init_ledger = true;
    cfg.limits.header_timeout = Duration::from_millis(500);
    cfg.limits.body_timeout = Duration::from_millis(500);
    cfg.limits.idle_timeout = Duration::from_millis(500);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::bind(model, cfg)).unwrap();
    let addr = server.local_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = rt.spawn(server.run(async move {
        let _ = stop_rx.await;
    }));
    let spent = || {
        rt.block_on(admin::read_state(&spec, &model_id))
            .unwrap()
            .unwrap()
            .spent
    };
    let mut rng = Rng(seed);
    let mut by_family: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    let mut closed_by_family: BTreeMap<&str, usize> = BTreeMap::new();
    let t0 = Instant::now();
    let mut done = 0usize;
    let mut before = spent();
    for i in 0..cases {
        if t0.elapsed() > Duration::from_secs(secs) {
            break;
        }
        let case = generate(&mut rng);
        let resp = exchange(addr, &case, Duration::from_secs(10));
        let key = if resp.is_empty() {
            "closed".to_string()
        } else {
            let (status, headers, body) = parse(&resp).unwrap_or_else(|| {
                panic!(
                    "case {i} ({}): malformed response {:?}",
                    case.family,
                    String::from_utf8_lossy(&resp[..resp.len().min(300)])
                )
            });
            let is_json = headers
                .iter()
                .any(|(k, v)| k == "content-type" && v.starts_with("application/json"));
            if is_json {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
                    panic!(
                        "case {i} ({}): a JSON response that is not JSON: {e}",
                        case.family
                    )
                });
                if status >= 400 {
                    assert!(
                        v["error"]["code"].is_string() && v["error"]["message"].is_string(),
                        "case {i} ({}): error body without code/message: {v}",
                        case.family
                    );
                }
            }
            assert!(
                status != 500,
                "case {i} ({}): internal error {}",
                case.family,
                String::from_utf8_lossy(&body)
            );
            status.to_string()
        };
        if case.must_succeed {
            assert_eq!(key, "200", "case {i}: a valid request must be answered");
        }
        let after = spent();
        if key == "200" {
            // only /v1/predict spends, and at most one unit per row
            assert!(
                after - before <= case.rows.max(1100),
                "case {i} ({}): spent {}",
                case.family,
                after - before
            );
            if case.must_succeed {
                assert!(after - before <= case.rows);
            }
        } else {
            assert_eq!(
                after, before,
                "case {i} ({}): a refused request ({key}) spent budget",
                case.family
            );
        }
        before = after;
        *by_family.entry(case.family).or_default() += 1;
        if key == "closed" {
            *closed_by_family.entry(case.family).or_default() += 1;
        }
        *by_status.entry(key).or_default() += 1;
        done += 1;
        if i % 50 == 0 {
            let h = exchange(
                addr,
                &Case {
                    family: "health",
                    bytes: b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                        .to_vec(),
                    half_close: false,
                    must_succeed: true,
                    rows: 0,
                },
                Duration::from_secs(10),
            );
            assert!(
                h.starts_with(b"HTTP/1.1 200"),
                "the server is unhealthy after case {i}"
            );
        }
    }
    assert!(!handle.is_finished(), "the server stopped during the run");
    let _ = stop_tx.send(());
    rt.block_on(handle).unwrap().unwrap();
    eprintln!(
        "http fuzz: seed {seed}, {done} cases in {:.1} s; by family {by_family:?}; by status {by_status:?}; \
         closed without a response, by family: {closed_by_family:?}",
        t0.elapsed().as_secs_f64()
    );
    assert!(done >= cases.min(300), "too few cases ran: {done}");
}
