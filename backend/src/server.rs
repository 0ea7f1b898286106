//! Serving the router: accepting connections within their bounds (how many, how many from one
//! address, how long a client may take to send or to read), and a graceful shutdown.

use std::{
    future::Future,
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Router,
    extract::Request,
    http::{Method, StatusCode, header},
    response::IntoResponse,
};
use hyper_util::server::graceful::GracefulShutdown;
use ipnet::IpNet;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Sleep,
};

use crate::{
    tally::{Place, Tally},
    work::Work,
};

/// How long in-flight requests get once a shutdown begins; then the server stops anyway.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);

/// How the server holds its connections.
#[derive(Debug, Clone)]
pub struct Connections {
    /// Open connections at most; past it a connection is served health and log-in only (on
    /// [`Connections::LIFELINES`] more), then answered `503` and closed.
    pub max: usize,
    /// Open connections from one client address at most; past it that address is answered
    /// `503`, so one client cannot fill `max` for everyone.
    pub per_address: usize,
    /// Addresses `per_address` does not hold: the trusted proxies, through which every client
    /// comes.
    pub shared_addresses: Vec<IpNet>,
    /// How long a client has to send a request's headers, counted from when the connection
    /// opens or its last response went out: a connection that sends nothing, sends headers a
    /// line at a time, or sits idle between keep-alive requests is closed after it.
    pub header_timeout: Duration,
    /// How long a response may wait for the client to take any of it: a client that stops
    /// reading is dropped after it.
    pub write_timeout: Duration,
}

impl Connections {
    /// Open files this process keeps for everything but connections (database, files, logs).
    const RESERVED_FILES: u64 = 128;
    /// Connections past `max` kept for `GET /api/health` and `POST /api/auth/login`, one
    /// request each.
    pub const LIFELINES: usize = 16;
    /// How long a lifeline waits for its request: a monitor or a log-in sends it at once, and
    /// a lifeline held idle keeps it from them.
    pub const LIFELINE_HEADER_TIMEOUT: Duration = Duration::from_secs(1);

    /// `max` connections at most, fewer when the open-file limit would not hold them and their
    /// lifelines; the other bounds at their defaults.
    pub fn within(max: usize, open_files: u64) -> Self {
        let room = open_files.saturating_sub(Self::RESERVED_FILES + Self::LIFELINES as u64);
        Self {
            max: max.min(usize::try_from(room).unwrap_or(usize::MAX)).max(1),
            per_address: 256,
            shared_addresses: Vec::new(),
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves until `shutdown` resolves; then fires every running job's interrupt (see `work`)
/// and lets in-flight requests finish, for at most [`SHUTDOWN_LIMIT`]. Connections are
/// bounded by `connections`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    work: Work,
    connections: Connections,
) -> io::Result<()> {
    tracing::info!(
        max_connections = connections.max,
        per_address = connections.per_address,
        header_timeout_s = connections.header_timeout.as_secs_f64(),
        write_timeout_s = connections.write_timeout.as_secs_f64(),
        "accepting connections"
    );
    let graceful = GracefulShutdown::new();
    let gate = Gate::new(&connections);
    tokio::pin!(shutdown);
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // out of files or the like: say so, and give the others time to close
                    tracing::warn!(%err, "accept error");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        match gate.admit(peer.ip()) {
            Ok(pass) => serve_connection(socket, peer, pass, &router, &connections, &graceful),
            Err(refusal) => {
                tokio::spawn(refuse(socket, refusal));
            }
        }
    }
    tracing::info!("shutting down: stopping running jobs, finishing requests");
    work.stop_all();
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_LIMIT) => {
            tracing::warn!(limit_s = SHUTDOWN_LIMIT.as_secs(), "requests still running at the shutdown limit; stopping anyway");
        }
    }
    Ok(())
}

/// Serves one admitted connection in a task of its own, within `connections`' timeouts; a
/// lifeline answers health and log-in only, once. `pass` is given back when it closes.
fn serve_connection(
    socket: TcpStream,
    peer: SocketAddr,
    pass: Pass,
    router: &Router,
    connections: &Connections,
    graceful: &GracefulShutdown,
) {
    let _ = socket.set_nodelay(true);
    let (router, lifeline) = (router.clone(), pass.lifeline);
    let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let request = request.map(axum::body::Body::new);
        let router = router.clone();
        async move {
            if lifeline && !is_lifeline(&request) {
                return Ok(Refusal::OnlyLifelines.response());
            }
            tower::ServiceExt::oneshot(router, request).await
        }
    });
    let header_timeout = if lifeline {
        connections
            .header_timeout
            .min(Connections::LIFELINE_HEADER_TIMEOUT)
    } else {
        connections.header_timeout
    };
    let socket = WriteDeadline::new(socket, connections.write_timeout);
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(!lifeline)
        .serve_connection(hyper_util::rt::TokioIo::new(socket), service);
    let connection = graceful.watch(connection);
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(%err, %peer, "connection closed");
        }
        drop(pass);
    });
}

/// Raises the soft open-file limit to the hard one (each connection is a file), and says
/// what it got.
pub fn raise_open_file_limit() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => {
            tracing::info!(open_files = limit, "open-file limit");
            limit
        }
        Err(err) => {
            let limit = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
            tracing::warn!(%err, open_files = limit, "cannot raise the open-file limit");
            limit
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(%err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(%err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// Who gets a connection: the slots under the cap, the lifelines past it, and each address's
/// count.
struct Gate {
    max: usize,
    slots: Arc<Semaphore>,
    lifelines: Arc<Semaphore>,
    per_address: usize,
    shared_addresses: Vec<IpNet>,
    open: Tally<IpAddr>,
}

/// Why a connection is refused.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    AtTheCap(usize),
    FromOneAddress(usize),
    /// A request other than health and log-in on a connection past the cap.
    OnlyLifelines,
}

/// A connection's hold on its slot (or lifeline) and on its address's count, given back when
/// it closes.
struct Pass {
    _slot: OwnedSemaphorePermit,
    _address: Option<Place<IpAddr>>,
    lifeline: bool,
}

impl Gate {
    fn new(connections: &Connections) -> Self {
        Self {
            max: connections.max,
            slots: Arc::new(Semaphore::new(connections.max)),
            lifelines: Arc::new(Semaphore::new(Connections::LIFELINES)),
            per_address: connections.per_address,
            shared_addresses: connections.shared_addresses.clone(),
            open: Tally::default(),
        }
    }

    fn admit(&self, ip: IpAddr) -> Result<Pass, Refusal> {
        let (address, others) = self.count(ip)?;
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(Pass {
                _slot: slot,
                _address: address,
                lifeline: false,
            });
        }
        // Lifelines are for addresses that hold nothing else: those filling the cap would
        // take them from the monitor and the person logging in.
        let lifeline = (others == 0)
            .then(|| Arc::clone(&self.lifelines).try_acquire_owned().ok())
            .flatten()
            .ok_or(Refusal::AtTheCap(self.max))?;
        Ok(Pass {
            _slot: lifeline,
            _address: address,
            lifeline: true,
        })
    }

    /// Counts a connection from `ip`, unless it is a shared address; and how many others the
    /// address holds (none for a shared one).
    fn count(&self, ip: IpAddr) -> Result<(Option<Place<IpAddr>>, usize), Refusal> {
        if self.shared_addresses.iter().any(|net| net.contains(&ip)) {
            return Ok((None, 0));
        }
        let (place, others) = self
            .open
            .take(ip, self.per_address)
            .ok_or(Refusal::FromOneAddress(self.per_address))?;
        Ok((Some(place), others))
    }
}

/// Health and log-in: what a connection past the cap is served, so a monitor and a person
/// still get in while the server is full.
fn is_lifeline(request: &Request) -> bool {
    let path = request.uri().path();
    (request.method() == Method::GET && path == "/api/health")
        || (request.method() == Method::POST && path == "/api/auth/login")
}

/// What a refused connection gets before it is closed: the error contract's JSON.
async fn refuse(mut socket: TcpStream, refusal: Refusal) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::to_string(&refusal.error()).unwrap_or_default();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        Refusal::RETRY_AFTER_S,
        body.len()
    );
    // Answer, then read what the client sent until it closes: closing with its request unread
    // would reset the connection, and the client would lose the answer. A second at most.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        socket.write_all(answer.as_bytes()).await?;
        socket.shutdown().await?;
        let mut unread = [0u8; 4_096];
        while socket.read(&mut unread).await? > 0 {}
        io::Result::Ok(())
    })
    .await;
}

impl Refusal {
    const RETRY_AFTER_S: u64 = 5;

    fn error(self) -> shared::ApiError {
        let message = match self {
            Self::AtTheCap(max) => format!(
                "the console holds as many connections as it serves ({max}); try again in 5 seconds"
            ),
            Self::FromOneAddress(most) => format!(
                "your address holds as many connections as one address may ({most}); close some, or try again in 5 seconds"
            ),
            Self::OnlyLifelines => "the console holds as many connections as it serves: only health and log-in are answered now; try again in 5 seconds".to_owned(),
        };
        shared::ApiError::new(shared::ErrorCode::Unavailable, message)
    }

    /// The refusal as a response, for a request on a lifeline.
    fn response(self) -> axum::response::Response {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, Self::RETRY_AFTER_S.to_string())],
            axum::Json(self.error()),
        )
            .into_response()
    }
}

/// A socket whose writes fail once the client has taken nothing for `timeout`: hyper has no
/// write timeout of its own, so a client that stops reading would hold its connection (and
/// the response's buffers) for as long as it keeps the socket open.
struct WriteDeadline {
    socket: TcpStream,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl WriteDeadline {
    fn new(socket: TcpStream, timeout: Duration) -> Self {
        Self {
            socket,
            timeout,
            stalled: None,
        }
    }

    /// `progress` as it is, unless it is pending past the deadline.
    fn within<T>(
        &mut self,
        cx: &mut Context<'_>,
        progress: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if progress.is_ready() {
            self.stalled = None;
            return progress;
        }
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing of the response within the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let progress = Pin::new(&mut this.socket).poll_write(cx, buf);
        this.within(cx, progress)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let progress = Pin::new(&mut this.socket).poll_write_vectored(cx, bufs);
        this.within(cx, progress)
    }

    fn is_write_vectored(&self) -> bool {
        self.socket.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let progress = Pin::new(&mut this.socket).poll_flush(cx);
        this.within(cx, progress)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_shutdown(cx)
    }
}
