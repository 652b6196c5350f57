//! The HTTPS download path of `data fetch cifar10` ([`download_verified`]) against a local
//! HTTP server on 127.0.0.1 (a `std::net::TcpListener` thread in this file; never an outside
//! address): a complete download, resuming a truncated `.part` with an HTTP `Range` request,
//! a transfer that breaks off and is resumed by the next run, a server that ignores `Range`,
//! refusal of a file whose SHA-256 does not match, and an unreachable server.

use privpred_data::fetch::{Download, DownloadError, download_verified, part_path};
use privpred_data::{DataError, fsutil};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// How the test server answers.
#[derive(Clone, Copy)]
struct Behaviour {
    /// Answer `Range` requests with 206 (else always the whole file with 200).
    ranges: bool,
    /// Send only this many body bytes of the first answer, then close the connection
    /// (its `Content-Length` still announces the full length).
    cut_first_after: Option<usize>,
}

struct Server {
    url: String,
    /// The `Range` header of each request ("" when none).
    ranges: Arc<Mutex<Vec<String>>>,
}

fn serve(body: Vec<u8>, b: Behaviour) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let log = ranges.clone();
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            let cut = if i == 0 { b.cut_first_after } else { None };
            answer(stream, &body, b.ranges, cut, &log);
        }
    });
    Server {
        url: format!("http://{addr}/cifar-10-binary.tar.gz"),
        ranges,
    }
}

fn answer(
    mut s: TcpStream,
    body: &[u8],
    ranges: bool,
    cut: Option<usize>,
    log: &Mutex<Vec<String>>,
) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut range = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = v.trim().to_string();
        }
    }
    log.lock().unwrap().push(range.clone());
    let start = range
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|_| ranges);
    let head = match start {
        Some(st) if st >= body.len() => {
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            return;
        }
        Some(st) => format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {st}-{}/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len() - 1,
            body.len(),
            body.len() - st
        ),
        None => format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ),
    };
    let from = start.unwrap_or(0);
    let to = cut.map_or(body.len(), |c| (from + c).min(body.len()));
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&body[from..to]);
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Both);
}

/// 300,000 deterministic pseudo-random bytes.
fn payload() -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..300_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn download(url: &str, body: &[u8]) -> Download {
    Download {
        url: url.to_string(),
        sha256: fsutil::sha256_bytes(body),
    }
}

const PLAIN: Behaviour = Behaviour {
    ranges: true,
    cut_first_after: None,
};

#[test]
fn downloads_verifies_and_renames_into_place() {
    let body = payload();
    let srv = serve(body.clone(), PLAIN);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("sub").join("cifar-10-binary.tar.gz");
    download_verified(&download(&srv.url, &body), &dest, false).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert!(!part_path(&dest).exists());
    assert_eq!(*srv.ranges.lock().unwrap(), vec![String::new()]);
}

#[test]
fn a_truncated_part_file_is_resumed_with_a_range_request() {
    let body = payload();
    let srv = serve(body.clone(), PLAIN);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    std::fs::write(part_path(&dest), &body[..100_000]).unwrap();
    download_verified(&download(&srv.url, &body), &dest, false).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert_eq!(
        *srv.ranges.lock().unwrap(),
        vec!["bytes=100000-".to_string()]
    );
}

#[test]
fn a_transfer_that_breaks_off_keeps_its_bytes_and_the_next_run_resumes() {
    let body = payload();
    let srv = serve(
        body.clone(),
        Behaviour {
            ranges: true,
            cut_first_after: Some(120_000),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    let d = download(&srv.url, &body);
    let e = download_verified(&d, &dest, false).unwrap_err();
    assert!(
        matches!(&e, DownloadError::Network(m) if m.contains("resumes")),
        "{e}"
    );
    assert!(!dest.exists());
    let kept = std::fs::read(part_path(&dest)).unwrap();
    assert!(
        !kept.is_empty() && kept.len() <= 120_000,
        "{} bytes kept",
        kept.len()
    );
    assert_eq!(kept[..], body[..kept.len()]);
    download_verified(&d, &dest, false).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    let ranges = srv.ranges.lock().unwrap().clone();
    assert_eq!(
        ranges,
        vec![String::new(), format!("bytes={}-", kept.len())]
    );
}

#[test]
fn a_server_that_ignores_range_restarts_the_file_from_zero() {
    let body = payload();
    let srv = serve(
        body.clone(),
        Behaviour {
            ranges: false,
            cut_first_after: None,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    // a stale .part whose bytes are not a prefix of the file
    std::fs::write(part_path(&dest), vec![0xAB; 5_000]).unwrap();
    download_verified(&download(&srv.url, &body), &dest, false).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
}

#[test]
fn a_complete_part_file_too_long_for_the_server_starts_over() {
    let body = payload();
    let srv = serve(body.clone(), PLAIN);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    std::fs::write(part_path(&dest), vec![1u8; body.len() + 10]).unwrap();
    download_verified(&download(&srv.url, &body), &dest, false).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    let ranges = srv.ranges.lock().unwrap().clone();
    assert_eq!(
        ranges,
        vec![format!("bytes={}-", body.len() + 10), String::new()]
    );
}

#[test]
fn a_checksum_mismatch_is_refused_and_nothing_is_kept() {
    let body = payload();
    let srv = serve(body.clone(), PLAIN);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    let mut d = download(&srv.url, &body);
    d.sha256 = fsutil::sha256_bytes(b"something else");
    match download_verified(&d, &dest, false) {
        Err(DownloadError::Other(DataError::Checksum {
            expected, actual, ..
        })) => {
            assert_eq!(expected, d.sha256);
            assert_eq!(actual, fsutil::sha256_bytes(&body));
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert!(!dest.exists());
    assert!(!part_path(&dest).exists());
}

#[test]
fn an_unreachable_server_is_a_network_error() {
    // a port that was just free: nothing listens there
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    let d = Download {
        url: format!("http://127.0.0.1:{port}/cifar-10-binary.tar.gz"),
        sha256: "0".repeat(64),
    };
    let e = download_verified(&d, &dest, false).unwrap_err();
    assert!(
        matches!(&e, DownloadError::Network(m) if m.contains("cannot download")),
        "{e}"
    );
    assert!(!dest.exists() && !part_path(&dest).exists());
}
