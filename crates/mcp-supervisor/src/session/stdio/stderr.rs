//! Draining the child's stderr into our debug log, line by line.
//!
//! The pipe must be drained: a child blocked on a full stderr pipe stops
//! answering MCP. Lines are bounded so a child that writes without newlines
//! cannot make us buffer without limit, and control characters are replaced
//! so a child cannot forge log lines or send escape sequences to a terminal.

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};

/// Longest stderr line kept, in bytes; the rest of a longer line is dropped.
pub(super) const MAX_LINE: usize = 4096;

/// Logs every line of `stderr` at debug level until EOF (the whole process
/// group has closed it) or a read error.
pub(super) async fn drain(connection: String, stderr: impl AsyncRead + Unpin) {
    read_lines(stderr, MAX_LINE, |line| {
        tracing::debug!(connection = %connection, line = %line, "upstream stderr");
    })
    .await;
}

/// Calls `emit` with each line of `reader` (without its `\n` or `\r\n`),
/// cut to `max` bytes with a marker when longer.
async fn read_lines(reader: impl AsyncRead + Unpin, max: usize, mut emit: impl FnMut(&str)) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut truncated = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let newline = chunk.iter().position(|&byte| byte == b'\n');
        let part = &chunk[..newline.unwrap_or(chunk.len())];
        let room = max - line.len();
        if part.len() > room {
            truncated = true;
        }
        line.extend_from_slice(&part[..part.len().min(room)]);
        let used = newline.map_or(chunk.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            emit(&render(&line, truncated));
            line.clear();
            truncated = false;
        }
    }
    if !line.is_empty() || truncated {
        emit(&render(&line, truncated));
    }
}

/// The printable form of one raw line.
fn render(line: &[u8], truncated: bool) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut text: String = String::from_utf8_lossy(line)
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    if truncated {
        text.push_str(" […truncated]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut out = Vec::new();
        read_lines(input, max, |line| out.push(line.to_owned())).await;
        out
    }

    #[tokio::test]
    async fn splits_lines_and_strips_line_endings() {
        assert_eq!(
            lines(b"one\r\ntwo\n\nlast", 64).await,
            ["one", "two", "", "last"]
        );
        assert!(lines(b"", 64).await.is_empty());
    }

    #[tokio::test]
    async fn bounds_long_lines_and_keeps_reading_after_them() {
        let mut input = vec![b'x'; 100_000];
        input.extend_from_slice(b"\nnext\n");
        input.extend(vec![b'y'; 20]);
        let out = lines(&input, 8).await;
        assert_eq!(
            out,
            ["xxxxxxxx […truncated]", "next", "yyyyyyyy […truncated]"]
        );
    }

    #[tokio::test]
    async fn replaces_control_characters() {
        assert_eq!(
            lines(b"a\x1b[31mred\tb\x00\n", 64).await,
            ["a\u{fffd}[31mred\tb\u{fffd}"]
        );
    }
}
