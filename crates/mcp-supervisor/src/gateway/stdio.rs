//! The gateway over stdio (`serve --stdio`): rmcp's line transport, with
//! the door in front of it (`door.rs`). Each line the client writes is
//! checked as it arrives; a `tools/call` the door refuses never reaches
//! rmcp's server, and its `-32602` goes out through the transport's own
//! writer, between whole messages.

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use rmcp::{
    RoleServer, ServiceExt,
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        Transport,
        async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH},
    },
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::mpsc,
};

use super::{GatewayHandler, GatewayState, door};

/// Serves the gateway over this process's stdin/stdout until the client
/// closes it (`serve --stdio`). Logs must go to stderr.
pub async fn serve_stdio(state: Arc<GatewayState>) -> io::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio();
    serve_lines(state, stdin, stdout).await
}

/// Serves the gateway on `read` and `write`, one JSON-RPC message a line,
/// until `read` ends.
pub(super) async fn serve_lines<R, W>(state: Arc<GatewayState>, read: R, write: W) -> io::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (refusals, refused) = mpsc::unbounded_channel();
    let read = Door {
        read,
        refusals,
        line: Vec::new(),
        admitted: Vec::new(),
        handed: 0,
        ended: false,
    };
    let transport = Checked {
        inner: AsyncRwTransport::new_server(read, write),
        refused,
    };
    let service = GatewayHandler::new(state)
        .serve(transport)
        .await
        .map_err(io::Error::other)?;
    service.waiting().await.map_err(io::Error::other)?;
    Ok(())
}

/// rmcp's transport, and the door's refusals to write through it.
struct Checked<R: AsyncRead + Unpin, W: AsyncWrite> {
    inner: AsyncRwTransport<RoleServer, Door<R>, W>,
    refused: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
}

impl<R, W> Transport<RoleServer> for Checked<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            tokio::select! {
                biased;
                Some(refusal) = self.refused.recv() => {
                    // Written by a task of its own: rmcp drops this future
                    // whenever it has something else to do, and a refusal
                    // taken must not be lost with it. The writer's lock
                    // keeps whole messages apart.
                    let sent = self.inner.send(refusal);
                    tokio::spawn(async move {
                        if let Err(error) = sent.await {
                            tracing::debug!(%error, "a refusal could not be written");
                        }
                    });
                }
                message = self.inner.receive() => return message,
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.inner.close().await
    }
}

/// The UTF-8 byte order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The client's bytes, whole lines at a time, but for the lines the door
/// refuses: their answers go to `refusals` instead.
struct Door<R> {
    read: R,
    refusals: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    /// The line being read, not yet whole.
    line: Vec<u8>,
    /// Admitted bytes, handed on from `handed`.
    admitted: Vec<u8>,
    handed: usize,
    ended: bool,
}

impl<R> Door<R> {
    /// Moves each whole line of `line` to `admitted`, or its refusal to
    /// `refusals`. A line longer than rmcp's limit is handed on unchecked,
    /// as it comes: rmcp drops it whole.
    fn sort(&mut self) {
        let mut start = 0;
        while let Some(end) = memchr::memchr(b'\n', &self.line[start..]) {
            let whole = &self.line[start..=start + end];
            // rmcp's line codec drops a leading byte order mark, as RFC
            // 8259 allows; the door reads what rmcp will.
            let message = whole.strip_prefix(UTF8_BOM).unwrap_or(whole);
            match door::answer(message) {
                Some(refusal) => drop(self.refusals.send(refusal)),
                None => self.admitted.extend_from_slice(whole),
            }
            start += end + 1;
        }
        self.line.drain(..start);
        if self.line.len() > DEFAULT_MAX_LINE_LENGTH || self.ended {
            self.admitted.append(&mut self.line);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Door<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.handed < this.admitted.len() {
                let rest = &this.admitted[this.handed..];
                let count = rest.len().min(buf.remaining());
                buf.put_slice(&rest[..count]);
                this.handed += count;
                return Poll::Ready(Ok(()));
            }
            this.admitted.clear();
            this.handed = 0;
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.read).poll_read(cx, &mut read))?;
            let filled = read.filled();
            this.ended = filled.is_empty();
            this.line.extend_from_slice(filled);
            this.sort();
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// What a `Door` hands on of `input` written in `chunk`-byte pieces,
    /// and the ids of the calls it refused.
    async fn through(input: &str, chunk: usize) -> (String, Vec<String>) {
        let (mut client, server) = tokio::io::duplex(64);
        let (refusals, mut refused) = mpsc::unbounded_channel();
        let mut door = Door {
            read: server,
            refusals,
            line: Vec::new(),
            admitted: Vec::new(),
            handed: 0,
            ended: false,
        };
        let bytes = input.as_bytes().to_vec();
        let writer = tokio::spawn(async move {
            for piece in bytes.chunks(chunk) {
                client.write_all(piece).await.unwrap();
            }
        });
        let mut handed = String::new();
        door.read_to_string(&mut handed).await.unwrap();
        writer.await.unwrap();
        let mut ids = Vec::new();
        while let Ok(ServerJsonRpcMessage::Error(error)) = refused.try_recv() {
            ids.push(serde_json::to_string(&error.id).unwrap());
        }
        (handed, ids)
    }

    #[tokio::test]
    async fn refused_calls_are_taken_out_of_the_stream_whole() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"\ud83d\ude00"}}}"#;
        let bad = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"\ud800"}}}"#;
        let dup = r#"{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"a__echo","arguments":{"text":"a","text":"b"}}}"#;
        // rmcp's codec reads a line after a byte order mark; so does the door.
        let bom = "\u{feff}";
        let input = format!("{good}\n{bad}\r\n{dup}\n\n{bom}{bad}\n{good}");
        for chunk in [1, 7, 64, 4096] {
            let (handed, refused) = through(&input, chunk).await;
            assert_eq!(handed, format!("{good}\n\n{good}"), "chunks of {chunk}");
            assert_eq!(refused, ["2", "\"d\"", "2"], "chunks of {chunk}");
        }
    }

    /// Over the whole transport: a refused call is answered `-32602` on
    /// the client's side of the pipe, and rmcp's server answers the rest.
    #[actix_rt::test]
    async fn a_refused_call_is_answered_through_the_transport() {
        use actix::Actor;
        let config =
            crate::config::Config::from_toml_str("", std::path::Path::new("t.toml"), &|_| None)
                .unwrap();
        let registry = crate::registry::Registry::new(config).start();
        let state = GatewayState::new(registry, Default::default(), Default::default());
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        let serving = tokio::spawn(serve_lines(state, read, write));
        let (reply, mut ask) = tokio::io::split(client);
        let mut replies = BufReader::new(reply).lines();
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let bad = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"a__echo","arguments":{"n":1e400}}}"#;
        for line in [initialize, initialized, bad] {
            ask.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        }
        let mut answers = Vec::new();
        while answers.len() < 2 {
            let line = replies.next_line().await.unwrap().expect("a reply");
            answers.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
        }
        let refusal = answers
            .iter()
            .find(|answer| answer["id"] == 9)
            .expect("id 9");
        assert_eq!(refusal["error"]["code"], -32602, "{refusal}");
        assert!(
            answers
                .iter()
                .any(|answer| answer["id"] == 0 && answer["result"].is_object())
        );
        ask.shutdown().await.unwrap();
        serving.await.unwrap().unwrap();
    }
}
