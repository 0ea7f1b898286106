//! The server's connections within their bounds: silent, slow and idle clients are closed;
//! past the cap a client is told so and health and log-in still answer; one address cannot fill
//! the cap; a client that stops reading is dropped.

use std::time::{Duration, Instant};

use backend::{Connections, work::Work};
use shared::{ApiError, ErrorCode};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::user;

/// `max` connections, 30 s for headers and for a stalled write, no per-address limit to speak
/// of.
fn bounds(max: usize) -> Connections {
    Connections {
        max,
        per_address: 1_000,
        shared_addresses: Vec::new(),
        header_timeout: Duration::from_secs(30),
        write_timeout: Duration::from_secs(30),
    }
}

/// The real router served on loopback with `connections`; its address and stop switch.
async fn served(
    pool: &PgPool,
    connections: backend::Connections,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(backend::serve(
        listener,
        crate::common::router(pool.clone()),
        async {
            let _ = stopped.await;
        },
        Work::new(1, 1, 1, 1),
        connections,
    ));
    (addr, stop)
}

/// How long until the server closes `socket` (reads until EOF), at most `limit`.
async fn closed_within(socket: &mut tokio::net::TcpStream, limit: Duration) -> Duration {
    let since = Instant::now();
    let mut sink = Vec::new();
    tokio::time::timeout(limit, socket.read_to_end(&mut sink))
        .await
        .expect("the server closed the connection in time")
        .expect("read");
    since.elapsed()
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn silent_slow_and_idle_connections_are_closed(pool: PgPool) {
    let connections = backend::Connections {
        header_timeout: Duration::from_millis(500),
        ..bounds(16)
    };
    let (addr, _stop) = served(&pool, connections).await;
    // A connection that sends nothing.
    let mut silent = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    closed_within(&mut silent, Duration::from_secs(3)).await;
    // Headers a line at a time, 200 ms apart: never whole within the timeout.
    let mut slow = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let slow_writer = tokio::spawn(async move {
        for line in [
            "GET /api/health HTTP/1.1\r\n",
            "Host: x\r\n",
            "X-A: 1\r\n",
            "X-B: 2\r\n",
        ]
        .iter()
        .cycle()
        .take(40)
        {
            if slow.write_all(line.as_bytes()).await.is_err() {
                return slow;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        slow
    });
    let mut slow = slow_writer.await.expect("joined");
    assert!(closed_within(&mut slow, Duration::from_secs(3)).await < Duration::from_secs(3));
    // A keep-alive connection idle after its answer.
    let mut idle = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    idle.write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).await.expect("an answer");
    assert_eq!(&first, b"HTTP/1.1 200");
    closed_within(&mut idle, Duration::from_secs(3)).await;
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn past_the_connection_cap_and_its_lifelines_a_client_is_told_so(pool: PgPool) {
    let (addr, _stop) = served(&pool, bounds(3)).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from("127.0.0.1", &addr).await);
    }
    // Sixteen log-ins from sixteen addresses, their bodies never sent, hold the lifelines.
    let unfinished = format!(
        "POST /api/auth/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    for n in 0..Connections::LIFELINES {
        let mut log_in = connect_from(&format!("127.0.0.{}", 10 + n), &addr).await;
        log_in
            .write_all(unfinished.as_bytes())
            .await
            .expect("write");
        held.push(log_in);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Past them, and from an address that holds others, a client is told at once.
    for from in ["127.0.0.1", "127.0.0.99"] {
        let answer = ask_from(from, &addr, &get(&addr, "/api/health")).await;
        refused_saying(&answer, "connections as it serves (3)");
    }
    // One held connection closes: a new one is served.
    drop(held.remove(0));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = ask_from("127.0.0.1", &addr, &get(&addr, "/api/health")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A connection to `addr` from the loopback address `local` (all of 127.0.0.0/8 is this
/// machine's), so one test can be several clients.
async fn connect_from(local: &str, addr: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{local}:0").parse().expect("address"))
        .expect("bind");
    socket
        .connect(addr.parse().expect("address"))
        .await
        .expect("connect")
}

/// `request` sent from `local`, and the whole answer.
async fn ask_from(local: &str, addr: &str, request: &str) -> String {
    let mut stream = connect_from(local, addr).await;
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    answer
}

fn get(addr: &str, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
}

/// `answer` is a 503 with `Retry-After: 5` and the error contract's body, whose message says
/// `says`.
fn refused_saying(answer: &str, says: &str) {
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 5"), "{answer}");
    let body: ApiError = serde_json::from_str(answer.split("\r\n\r\n").nth(1).expect("a body"))
        .unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(body.code, ErrorCode::Unavailable);
    assert!(body.message.contains(says), "{}", body.message);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn one_address_cannot_fill_the_cap_and_health_and_log_in_answer_at_it(pool: PgPool) {
    user(&pool, "alex", &[shared::accounts::Role::Approver], &[]).await;
    let connections = Connections {
        per_address: 2,
        ..bounds(4)
    };
    let (addr, _stop) = served(&pool, connections).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(connect_from("127.0.0.1", &addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Its third connection is refused, with the reason, while the server has room.
    let third = ask_from("127.0.0.1", &addr, &get(&addr, "/api/health")).await;
    refused_saying(&third, "one address may (2)");
    // Another address is served; then it fills the cap with the first.
    let other = ask_from("127.0.0.2", &addr, &get(&addr, "/api/health")).await;
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
    for _ in 0..2 {
        held.push(connect_from("127.0.0.2", &addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // At the cap: health and log-in answer; anything else is told why.
    let health = ask_from("127.0.0.3", &addr, &get(&addr, "/api/health")).await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let body =
        serde_json::json!({"username": "alex", "password": crate::common::PASSWORD}).to_string();
    let log_in = ask_from(
        "127.0.0.3",
        &addr,
        &format!(
            "POST /api/auth/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(log_in.starts_with("HTTP/1.1 200"), "{log_in}");
    assert!(log_in.contains("set-cookie: "), "{log_in}");
    let from_a_filler = ask_from("127.0.0.2", &addr, &get(&addr, "/api/health")).await;
    refused_saying(&from_a_filler, "one address may (2)");
    let other_route = ask_from("127.0.0.3", &addr, &get(&addr, "/api/auth/session")).await;
    refused_saying(&other_route, "only health and log-in");
    // One held connection closes: the address's count and the cap give it back.
    drop(held.remove(0));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let again = ask_from("127.0.0.1", &addr, &get(&addr, "/api/auth/session")).await;
    assert!(!again.starts_with("HTTP/1.1 503"), "{again}");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_client_that_stops_reading_is_dropped_after_the_write_timeout(pool: PgPool) {
    let connections = Connections {
        write_timeout: Duration::from_millis(500),
        ..bounds(1)
    };
    let (addr, _stop) = served(&pool, connections).await;
    // The console's largest file, asked for eight times at once and never read, from a
    // socket that takes little: the server's writes stall.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4_096).expect("a small buffer");
    let mut stalled = socket
        .connect(addr.parse().expect("address"))
        .await
        .expect("connect");
    let wasm = format!(
        "GET /pkg/gpufleet_bg.wasm HTTP/1.1\r\nHost: {addr}\r\nAccept-Encoding: identity\r\n\r\n"
    );
    stalled
        .write_all(wasm.repeat(8).as_bytes())
        .await
        .expect("write");
    // It holds the only slot until the write timeout drops it; then a normal route is
    // served again (not the lifeline's 503).
    let since = Instant::now();
    loop {
        let answer = ask_from("127.0.0.2", &addr, &get(&addr, "/api/auth/session")).await;
        if !answer.starts_with("HTTP/1.1 503") {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the stalled client still holds its slot: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(stalled);
}
