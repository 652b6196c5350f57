//! A minimal blocking HTTP/1.1 client over `std::net` (keep-alive, `Content-Length` bodies),
//! enough for the service's tests and load generator without another HTTP stack.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response: status and body text.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers (lower-case names).
    pub headers: Vec<(String, String)>,
    /// Body as text.
    pub body: String,
}

impl HttpResponse {
    /// Parses the body as JSON (`Value::Null` if it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One keep-alive connection.
pub struct Client {
    addr: SocketAddr,
    token: Option<String>,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    /// A client for `addr`, optionally sending `Authorization: Bearer <token>`.
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Self {
        Client {
            addr,
            token: token.map(str::to_string),
            conn: None,
        }
    }

    /// Sends one request and reads the response; reconnects once if a kept-alive connection
    /// was closed by the server.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> std::io::Result<HttpResponse> {
        let fresh = self.conn.is_none();
        match self.try_request(method, path, body) {
            Ok(r) => Ok(r),
            Err(_) if !fresh => {
                self.conn = None;
                self.try_request(method, path, body)
            }
            Err(e) => Err(e),
        }
    }

    /// `GET path`.
    pub fn get(&mut self, path: &str) -> std::io::Result<HttpResponse> {
        self.request("GET", path, None)
    }

    /// `POST path` with a JSON body.
    pub fn post_json(&mut self, path: &str, body: &str) -> std::io::Result<HttpResponse> {
        self.request("POST", path, Some(body))
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> std::io::Result<HttpResponse> {
        if self.conn.is_none() {
            let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(10))?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            self.conn = Some(BufReader::new(s));
        }
        let conn = self.conn.as_mut().expect("connected");
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        let mut buf = req.into_bytes();
        if let Some(b) = body {
            buf.extend_from_slice(b.as_bytes());
        }
        let res = conn
            .get_mut()
            .write_all(&buf)
            .and_then(|_| read_response(conn));
        if res.is_err() {
            self.conn = None;
        }
        let r = res?;
        if r.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            self.conn = None;
        }
        Ok(r)
    }
}

fn read_response(conn: &mut BufReader<TcpStream>) -> std::io::Result<HttpResponse> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let body = if let Some(len) = get("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad content-length"))?;
        let mut b = vec![0u8; len];
        conn.read_exact(&mut b)?;
        b
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut b = Vec::new();
        loop {
            line.clear();
            conn.read_line(&mut line)?;
            let n = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("bad chunk size"))?;
            if n == 0 {
                line.clear();
                conn.read_line(&mut line)?;
                break;
            }
            let start = b.len();
            b.resize(start + n, 0);
            conn.read_exact(&mut b[start..])?;
            line.clear();
            conn.read_line(&mut line)?;
        }
        b
    } else {
        Vec::new()
    };
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
