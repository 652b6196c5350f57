//! One connection of the service: the idle watchdog's activity stamps, the in-flight count,
//! the socket wrapper that stamps them, and the HTTP/1.1 connection loop under the limits of
//! [`super::ConnLimits`]; a connection over the limit gets an immediate 503.

use super::*;

/// Milliseconds since a process-wide origin (for lock-free activity stamps).
fn now_ms() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// What a connection is doing: when it last moved a byte, and how many of its requests are
/// being handled.
#[derive(Default)]
struct Activity {
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn touch(&self) {
        self.last_ms.store(now_ms(), Ordering::Relaxed);
    }
}

/// Counts a request as in flight while it lives.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// A socket that stamps its [`Activity`] on every byte read or written.
struct Watched {
    inner: tokio::net::TcpStream,
    activity: Arc<Activity>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Serves one connection (HTTP/1.1) under the limits: hyper's header-read timeout, the body
/// timeout in the handler, a request timeout around the handler, and an idle watchdog.
pub(super) async fn serve_connection(
    stream: tokio::net::TcpStream,
    router: Router,
    limits: ConnLimits,
    mut stop: tokio::sync::watch::Receiver<bool>,
    _permit: tokio::sync::OwnedSemaphorePermit,
) {
    use tower::ServiceExt;
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::default());
    activity.touch();
    let io = hyper_util::rt::TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let act = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        act.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlight(act.clone());
        let fut = router.clone().oneshot(req.map(Body::new));
        async move {
            let resp = match tokio::time::timeout(limits.request_timeout, fut).await {
                Ok(Ok(r)) => r,
                Ok(Err(never)) => match never {},
                Err(_) => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "request_timeout",
                    format!(
                        "handling the request took longer than {:?}; nothing unrecorded was released",
                        limits.request_timeout
                    ),
                    json!({}),
                ),
            };
            drop(guard);
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEADER_BYTES.max(8192))
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let last = activity.last_ms.load(Ordering::Relaxed);
        let idle_deadline = last.saturating_add(limits.idle_timeout.as_millis() as u64);
        let wait = Duration::from_millis(idle_deadline.saturating_sub(now_ms()).max(1));
        tokio::select! {
            _ = conn.as_mut() => break,
            r = stop.changed(), if !stopping => {
                stopping = true;
                if r.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ = tokio::time::sleep(wait) => {
                let idle = now_ms().saturating_sub(activity.last_ms.load(Ordering::Relaxed));
                if activity.in_flight.load(Ordering::Relaxed) == 0
                    && idle >= limits.idle_timeout.as_millis() as u64
                {
                    break; // dropping the connection closes the socket
                }
            }
        }
    }
}

/// Answers a connection over the limit with 503 and closes it.
pub(super) async fn refuse_busy(mut stream: tokio::net::TcpStream, max: usize) {
    use tokio::io::AsyncWriteExt;
    let body = json!({ "error": {
        "code": "too_many_connections",
        "message": format!("the server holds its most connections ({max}, --max-connections); retry shortly"),
        "max_connections": max,
    }})
    .to_string();
    let msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(msg.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
