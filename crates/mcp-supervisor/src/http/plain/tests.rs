use std::sync::atomic::AtomicUsize;

use super::*;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Sends the request `build` makes for a loopback server's URL on a
/// lane; the server reads the request as far as its head (and whatever
/// came with it), then answers `answer`. Returns the URL, the answer and
/// the request as it arrived, each within 10 s (a test fails, never
/// hangs).
async fn exchange(
    answer: &'static str,
    build: impl FnOnce(&str) -> reqwest::RequestBuilder,
) -> (String, Answered, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp?key=1", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buffer = [0; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the request ended before its head did");
            head.extend_from_slice(&buffer[..n]);
        }
        socket.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8(head).unwrap()
    });
    let lane = PlainLane::unless_proxied(|_| None, TIMEOUT, TIMEOUT).unwrap();
    let request = build(&url).build().unwrap();
    let bound = Duration::from_secs(10);
    let to = LaneTarget::new(&reqwest::Url::parse(&url).unwrap(), Arc::default()).unwrap();
    let sent = lane.send_built(request, &to);
    let response = tokio::time::timeout(bound, sent).await.expect("answered");
    let head = tokio::time::timeout(bound, served).await.expect("served");
    (url, response.unwrap(), head.unwrap().to_ascii_lowercase())
}

/// An answer's body, read to its end.
async fn body_of(response: Answered) -> Vec<u8> {
    use http_body_util::BodyExt;
    response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec()
}

#[tokio::test]
async fn an_answer_comes_back_with_its_head_and_body() {
    let (_, response, head) = exchange(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
        |url| reqwest::Client::new().get(url).header("mcp-session-id", "s1"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(body_of(response).await, b"{}");
    assert!(head.starts_with("get /mcp?key=1 http/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nhost: 127.0.0.1:"), "{head}");
    assert_eq!(head.matches("\r\nhost:").count(), 1, "{head}");
    assert!(head.contains("\r\nmcp-session-id: s1\r\n"), "{head}");
    // No body: nothing says one follows.
    assert!(!head.contains("transfer-encoding"), "{head}");
}

#[tokio::test]
async fn a_redirect_is_an_answer_not_followed() {
    let (_, response, head) = exchange(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:9/elsewhere\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        |url| reqwest::Client::new().post(url).body("{}"),
    )
    .await;
    assert_eq!(response.status(), 307);
    assert!(head.starts_with("post /mcp?key=1 http/1.1\r\n"), "{head}");
    assert!(head.contains("\r\ncontent-length: 2\r\n"), "{head}");
}

/// A loopback server's counts: the connections it accepted, and those the
/// lane closed on it.
struct Counting {
    url: String,
    accepted: Arc<AtomicUsize>,
    closed_by_lane: Arc<AtomicUsize>,
}

impl Counting {
    /// Waits (at most 5 s, else fails with `failure`) for the lane to
    /// close a connection.
    async fn closed_within_5s(&self, failure: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.closed_by_lane.load(Ordering::SeqCst) == 0 {
            assert!(tokio::time::Instant::now() < deadline, "{failure}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A loopback server handing each connection it accepts to `serve`, with
/// the count of connections the lane closed.
async fn counted<F, S>(serve: F) -> Counting
where
    F: Fn(tokio::net::TcpStream, Arc<AtomicUsize>) -> S + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed_by_lane = Arc::new(AtomicUsize::new(0));
    let (counted, closed) = (accepted.clone(), closed_by_lane.clone());
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(socket, closed.clone()));
        }
    });
    Counting {
        url,
        accepted,
        closed_by_lane,
    }
}

/// Reads a request's head off `socket`; `false`, counted in `closed`, once
/// the lane closed the connection instead.
async fn read_head(socket: &mut tokio::net::TcpStream, closed: &AtomicUsize) -> bool {
    use tokio::io::AsyncReadExt;
    let (mut head, mut buffer) = (Vec::new(), [0; 1024]);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                closed.fetch_add(1, Ordering::SeqCst);
                return false;
            }
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    true
}

/// A loopback server answering every request on a connection with `body`
/// (keep-alive), closing each connection after `per_connection` answers
/// (as an upstream ends an idle connection).
async fn counting(body: &'static str, per_connection: usize) -> Counting {
    use tokio::io::AsyncWriteExt;
    counted(move |mut socket, closed| async move {
        for _ in 0..per_connection {
            if !read_head(&mut socket, &closed).await {
                return;
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
        }
    })
    .await
}

/// How much of an answer's body [`get`] reads.
#[derive(Clone, Copy, PartialEq)]
enum Read {
    Whole,
    Nothing,
    /// Its first frame, the rest left.
    FirstFrame,
}

/// GETs `url` on `lane` and `to` and reads its answer's body as `read`
/// says; what was read, as text; bounded to 10 s.
async fn get(lane: &PlainLane, to: &LaneTarget, url: &str, read: Read) -> String {
    use http_body_util::BodyExt;
    let request = reqwest::Client::new().get(url).build().unwrap();
    let bound = Duration::from_secs(10);
    let response = tokio::time::timeout(bound, lane.send_built(request, to))
        .await
        .expect("answered")
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = match read {
        Read::Nothing => return String::new(),
        Read::Whole => tokio::time::timeout(bound, body_of(response)).await,
        Read::FirstFrame => {
            let mut body = response.into_body();
            tokio::time::timeout(bound, body.frame())
                .await
                .map(|frame| frame.unwrap().unwrap().into_data().unwrap().to_vec())
        }
    };
    String::from_utf8(body.expect("read")).unwrap()
}

fn lane_for(url: &str, idle: Duration) -> (PlainLane, LaneTarget) {
    let lane = PlainLane::unless_proxied(|_| None, TIMEOUT, idle).unwrap();
    let to = LaneTarget::new(&reqwest::Url::parse(url).unwrap(), Arc::default()).unwrap();
    (lane, to)
}

#[tokio::test]
async fn an_endpoints_requests_reuse_one_connection_once_each_answer_is_read() {
    let server = counting("hello", usize::MAX).await;
    let (lane, to) = lane_for(&server.url, TIMEOUT);
    for _ in 0..5 {
        assert_eq!(get(&lane, &to, &server.url, Read::Whole).await, "hello");
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    // An answer left unread is read by its connection's task, which
    // gives the connection back: the next request takes it again.
    get(&lane, &to, &server.url, Read::Nothing).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    for _ in 0..3 {
        assert_eq!(get(&lane, &to, &server.url, Read::Whole).await, "hello");
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

/// How a [`chunked`] server's answer goes on after its first chunk.
#[derive(Clone, Copy)]
enum Rest {
    /// Its end, after a wait.
    EndsAfter(Duration),
    /// A chunk every millisecond, never ending.
    Endless,
}

/// A loopback server answering each request with a chunked body, its
/// first chunk at once and then `rest`.
async fn chunked(rest: Rest) -> Counting {
    use tokio::io::AsyncWriteExt;
    counted(move |mut socket, closed| async move {
        while read_head(&mut socket, &closed).await {
            let first = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n";
            socket.write_all(first.as_bytes()).await.unwrap();
            match rest {
                Rest::EndsAfter(wait) => {
                    tokio::time::sleep(wait).await;
                    socket.write_all(b"0\r\n\r\n").await.unwrap();
                }
                Rest::Endless => loop {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    if socket.write_all(b"4\r\nmore\r\n").await.is_err() {
                        closed.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                },
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_left_answer_whose_end_comes_soon_gives_its_connection_back() {
    let server = chunked(Rest::EndsAfter(Duration::from_millis(20))).await;
    let (lane, to) = lane_for(&server.url, TIMEOUT);
    for _ in 0..3 {
        assert_eq!(
            get(&lane, &to, &server.url, Read::FirstFrame).await,
            "first"
        );
        // The connection's task reads the end, then it is idle again.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(server.closed_by_lane.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_left_answer_that_never_ends_is_cut_off_and_its_connection_closed() {
    let server = chunked(Rest::Endless).await;
    let (lane, to) = lane_for(&server.url, TIMEOUT);
    assert_eq!(
        get(&lane, &to, &server.url, Read::FirstFrame).await,
        "first"
    );
    server
        .closed_within_5s("the endless answer's connection is still open")
        .await;
    // Not given back: the next request connects anew.
    assert_eq!(
        get(&lane, &to, &server.url, Read::FirstFrame).await,
        "first"
    );
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_connection_the_upstream_closed_while_idle_is_not_used_again() {
    // One answer per connection, then the server closes it.
    let server = counting("once", 1).await;
    let (lane, to) = lane_for(&server.url, TIMEOUT);
    for round in 1..=3 {
        assert_eq!(get(&lane, &to, &server.url, Read::Whole).await, "once");
        assert_eq!(server.accepted.load(Ordering::SeqCst), round);
        // Let the lane's connection task see the close.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The same, without waiting: a request on a connection that closed
    // before it was written goes again on a new one.
    for _ in 0..3 {
        assert_eq!(get(&lane, &to, &server.url, Read::Whole).await, "once");
    }
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let server = counting("idle", usize::MAX).await;
    let (lane, to) = lane_for(&server.url, Duration::from_millis(50));
    assert_eq!(get(&lane, &to, &server.url, Read::Whole).await, "idle");
    server
        .closed_within_5s("the idle connection is still open")
        .await;
    // Its pool starts over: the next request connects anew.
    assert_eq!(get(&lane, &to, &server.url, Read::Whole).await, "idle");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

/// An answer without a body, dropped on a thread outside any runtime,
/// closes its connection quietly (no sweeper to start there, no panic).
#[test]
fn an_answer_dropped_outside_a_runtime_closes_its_connection() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let response = runtime.block_on(async {
        let server = counting("", usize::MAX).await;
        let (lane, to) = lane_for(&server.url, TIMEOUT);
        let request = reqwest::Client::new().get(&server.url).build().unwrap();
        lane.send_built(request, &to).await.unwrap()
    });
    assert_eq!(response.body().size_hint().exact(), Some(0));
    let dropped = std::thread::spawn(move || drop(response)).join();
    assert!(dropped.is_ok(), "dropping the answer panicked");
}

#[test]
fn a_lanes_host_header_is_the_one_hypers_client_would_write() {
    let host = |url: &str| {
        LaneTarget::new(&reqwest::Url::parse(url).unwrap(), Arc::default())
            .map(|to| to.host.to_str().unwrap().to_owned())
    };
    assert_eq!(
        host("http://127.0.0.1:7410/mcp").as_deref(),
        Some("127.0.0.1:7410")
    );
    assert_eq!(
        host("http://Example.com:80/mcp").as_deref(),
        Some("example.com")
    );
    assert_eq!(
        host("http://example.com/mcp?k=1").as_deref(),
        Some("example.com")
    );
    assert_eq!(host("http://[::1]:8080/").as_deref(), Some("[::1]:8080"));
    let to = LaneTarget::new(
        &reqwest::Url::parse("http://[::1]/m?k=1").unwrap(),
        Arc::default(),
    )
    .unwrap();
    assert_eq!(to.address, "[::1]:80");
    assert_eq!(to.path, "/m?k=1");
    assert_eq!(host("https://example.com/mcp"), None);
}

#[test]
fn a_proxy_in_the_environment_turns_the_lane_off() {
    let none = |_: &str| None;
    assert!(PlainLane::unless_proxied(none, TIMEOUT, TIMEOUT).is_some());
    for name in PROXY_VARIABLES {
        let set = |asked: &str| (asked == name).then(|| "http://proxy:3128".into());
        assert!(
            PlainLane::unless_proxied(set, TIMEOUT, TIMEOUT).is_none(),
            "{name}"
        );
    }
    let empty = |_: &str| Some(std::ffi::OsString::new());
    assert!(PlainLane::unless_proxied(empty, TIMEOUT, TIMEOUT).is_some());
    let https_only = |asked: &str| (asked == "HTTPS_PROXY").then(|| "http://proxy:3128".into());
    assert!(PlainLane::unless_proxied(https_only, TIMEOUT, TIMEOUT).is_some());
}
