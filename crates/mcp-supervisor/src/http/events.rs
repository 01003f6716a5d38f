//! An upstream's event stream read by hand, as `sse_stream` reads it
//! (docs/DECISIONS.md #183).
//!
//! `sse_stream` finds each line byte by byte, gathers a line that spans
//! chunks into a buffer, then copies each field's value once more; on the
//! gateway's shared thread a 7 MB answer event was tens of milliseconds of
//! every other client's wait, and two more copies of it. Here lines are
//! found with `memchr`, a line within one chunk is read in place, and a
//! data line becomes its event's text with one copy. The events, their
//! fields and their errors are `sse_stream`'s (its `Sse` and `Error`,
//! quirks included: an unknown field or a line without a colon is an
//! error, not skipped); the tests hold the two to the same items on any
//! input cut into any chunks.

use std::{
    collections::VecDeque,
    pin::Pin,
    task::{Context, Poll, ready},
};

use bytes::Bytes;
use futures::Stream;
use sse_stream::{Error, Sse};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The events of a stream of body chunks.
pub(crate) struct Events<S> {
    body: S,
    parser: Parser,
}

impl<S> Events<S> {
    pub(crate) fn new(body: S) -> Self {
        Events {
            body,
            parser: Parser::default(),
        }
    }
}

#[derive(Default)]
struct Parser {
    parsed: VecDeque<Sse>,
    current: Option<Sse>,
    /// A line begun in an earlier chunk.
    unfinished: Vec<u8>,
    /// The last chunk ended with `\r`: a `\n` first in the next is its end.
    skip_leading_lf: bool,
    /// Past the first line (which may start with a byte-order mark).
    begun: bool,
}

impl Parser {
    fn line(&mut self, mut line: &[u8]) -> Result<(), Error> {
        if !std::mem::replace(&mut self.begun, true) {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            if let Some(event) = self.current.take() {
                self.parsed.push_back(event);
            }
            return Ok(());
        }
        let colon = memchr::memchr(b':', line).ok_or(Error::InvalidLine)?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        let text = || std::str::from_utf8(value).map_err(Error::Utf8Parse);
        match name {
            b"data" => {
                let line = text()?;
                let event = self.current.get_or_insert_default();
                match event.data.as_mut() {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(line);
                    }
                    None => event.data = Some(line.to_owned()),
                }
            }
            b"event" => {
                let value = text()?;
                let event = self.current.get_or_insert_default();
                once(&mut event.event, value, Error::DuplicatedEventLine)?;
            }
            // An id with a NUL is ignored whole (the specification's rule).
            b"id" if value.contains(&0) => {}
            b"id" => {
                let value = text()?;
                let event = self.current.get_or_insert_default();
                once(&mut event.id, value, Error::DuplicatedIdLine)?;
            }
            b"retry" => {
                let retry = text()?
                    .trim_ascii()
                    .parse::<u64>()
                    .map_err(Error::IntParse)?;
                let event = self.current.get_or_insert_default();
                if event.retry.is_some() {
                    return Err(Error::DuplicatedRetry);
                }
                event.retry = Some(retry);
            }
            // A comment.
            b"" => {}
            _ => return Err(Error::InvalidLine),
        }
        Ok(())
    }

    /// A line ended in this chunk: read in place when it began here.
    fn complete(&mut self, line: &[u8]) -> Result<(), Error> {
        if self.unfinished.is_empty() {
            return self.line(line);
        }
        let mut whole = std::mem::take(&mut self.unfinished);
        whole.extend_from_slice(line);
        let read = self.line(&whole);
        whole.clear();
        self.unfinished = whole;
        read
    }

    fn chunk(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        if std::mem::take(&mut self.skip_leading_lf) && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        while !bytes.is_empty() {
            let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) else {
                self.unfinished.extend_from_slice(bytes);
                return Ok(());
            };
            self.complete(&bytes[..end])?;
            let delimiter = bytes[end];
            bytes = &bytes[end + 1..];
            if delimiter == b'\r' {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.skip_leading_lf = true,
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }
}

/// Sets a field an event may have once (`event`, `id`) to `value`; `twice`
/// when it already has it, as `sse_stream` refuses it.
fn once(field: &mut Option<String>, value: &str, twice: Error) -> Result<(), Error> {
    if field.is_some() {
        return Err(twice);
    }
    *field = Some(value.to_owned());
    Ok(())
}

impl<S, E> Stream for Events<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Sse, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(event) = this.parser.parsed.pop_front() {
            return Poll::Ready(Some(Ok(event)));
        }
        loop {
            match ready!(Pin::new(&mut this.body).poll_next(cx)) {
                Some(Err(error)) => return Poll::Ready(Some(Err(Error::Body(Box::new(error))))),
                None => return Poll::Ready(None),
                Some(Ok(chunk)) => {
                    if chunk.is_empty() {
                        continue;
                    }
                    if let Err(error) = this.parser.chunk(&chunk) {
                        return Poll::Ready(Some(Err(error)));
                    }
                    if let Some(event) = this.parser.parsed.pop_front() {
                        return Poll::Ready(Some(Ok(event)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
