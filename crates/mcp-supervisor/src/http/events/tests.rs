use futures::{StreamExt, stream};

use super::*;

/// Every item of `chunks` read by `Events` and by `sse_stream`, as `Debug`
/// text each.
async fn both(chunks: &[Vec<u8>]) -> (Vec<String>, Vec<String>) {
    let body = || {
        stream::iter(
            chunks
                .iter()
                .map(|chunk| Ok::<_, std::io::Error>(Bytes::from(chunk.clone())))
                .collect::<Vec<_>>(),
        )
    };
    let ours: Vec<String> = Events::new(body())
        .map(|item| format!("{item:?}"))
        .collect()
        .await;
    let theirs: Vec<String> = sse_stream::SseStream::from_bytes_stream(body())
        .map(|item| format!("{item:?}"))
        .collect()
        .await;
    (ours, theirs)
}

/// A small generator, so that a failure names its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// `text` cut into chunks at random places.
fn cut(text: &[u8], rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let at = 1 + rng.below(rest.len().min(9));
        chunks.push(rest[..at].to_vec());
        rest = &rest[at..];
    }
    chunks
}

const STREAMS: &[&str] = &[
    "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
    "data: \nid: 0/0\nretry: 3000\n\ndata: {\"a\":1}\nid: 1/0\n\n",
    "event: message\r\ndata: {\"x\":\"é\"}\r\n\r\n",
    "\u{feff}data: first\ndata: second\n\n: a comment\n\nid: a\u{0}b\ndata:no space\n\n",
    "retry:  17 \nevent: e\nid: 7\ndata: d\n\nretry: x\n\n",
    "event: a\nevent: b\n\n",
    "id: 1\nid: 2\n\n",
    "retry: 1\nretry: 2\n\n",
    "no colon here\n\n",
    "unknown: field\n\n",
    "data: \r\rdata: lone carriage returns\r\r",
    "data: no blank line at the end",
    "data: \u{0}\n\n\n\n\ndata:\n\n",
    ":\n\ndata: x\n\n",
];

/// Any stream, in any chunks, gives the same events and errors either way.
#[tokio::test]
async fn events_are_read_as_sse_stream_reads_them() {
    let mut rng = Rng(0x5eed);
    for text in STREAMS {
        let whole = both(&[text.as_bytes().to_vec()]).await;
        assert_eq!(whole.0, whole.1, "{text:?}");
        for _ in 0..200 {
            let chunks = cut(text.as_bytes(), &mut rng);
            let (ours, theirs) = both(&chunks).await;
            assert_eq!(ours, theirs, "{chunks:?}");
        }
    }
    // Invalid UTF-8 in a field, and every single-byte change to a usual
    // answer's stream.
    let invalid = [b"data: \xff\n\n".to_vec()];
    let (ours, theirs) = both(&invalid).await;
    assert_eq!(ours, theirs);
    let usual = STREAMS[1].as_bytes();
    for variant in crate::codec::json_scan::mutations(usual) {
        for _ in 0..3 {
            let chunks = cut(&variant, &mut rng);
            let (ours, theirs) = both(&chunks).await;
            assert_eq!(ours, theirs, "{chunks:?}");
        }
    }
}

/// A body's error ends nothing by itself: it is an item, as `sse_stream`
/// gives it.
#[tokio::test]
async fn a_body_error_is_an_item() {
    let body = stream::iter(vec![
        Ok(Bytes::from_static(b"data: a\n\n")),
        Err(std::io::Error::other("reset")),
        Ok(Bytes::from_static(b"data: b\n\n")),
    ]);
    let items: Vec<String> = Events::new(body)
        .map(|item| format!("{item:?}"))
        .collect()
        .await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items[1].contains("reset"), "{items:?}");
    assert!(items[2].contains("\"b\""), "{items:?}");
}

/// A large data line in many chunks is one event, its text whole.
#[tokio::test]
async fn a_large_event_in_many_chunks_is_one() {
    let data = "x".repeat(3 << 20);
    let text = format!("event: message\ndata: {data}\n\n");
    let chunks: Vec<Vec<u8>> = text
        .as_bytes()
        .chunks(64 * 1024)
        .map(<[u8]>::to_vec)
        .collect();
    let events: Vec<_> = Events::new(stream::iter(
        chunks
            .into_iter()
            .map(|chunk| Ok::<_, std::io::Error>(Bytes::from(chunk))),
    ))
    .collect()
    .await;
    let [Ok(event)] = events.as_slice() else {
        panic!("one event")
    };
    assert_eq!(event.data.as_deref(), Some(data.as_str()));
    assert_eq!(event.event.as_deref(), Some("message"));
}
