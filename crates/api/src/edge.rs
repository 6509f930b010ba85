//! Errors hyper answers by itself. A request line or header block hyper cannot accept (a URI
//! over 65,534 bytes, more than 100 headers or a head over its buffer, a malformed request)
//! never reaches the router: hyper writes a bare `400`/`414`/`431` with no body and closes.
//! Each accepted connection is wrapped in [`EdgeIo`], which recognises those automatic answers
//! on their way out and writes them in the API's error shape instead, so every response a
//! client can get has the same JSON body and a `request-id`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::http::StatusCode;
use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::ApiError;
use mast_domain::ids::new_id;

/// What each automatic answer means, in API terms.
fn explanation(status: StatusCode) -> Option<&'static str> {
    match status {
        StatusCode::BAD_REQUEST => Some(
            "the request could not be parsed as HTTP/1.1: its request line or a header is malformed",
        ),
        StatusCode::URI_TOO_LONG => {
            Some("the request URI is too long: it may be at most 65,534 bytes")
        }
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => Some(
            "the request's headers are too large: at most 100 headers, and at most about 400 KB for the request line and headers together",
        ),
        _ => None,
    }
}

/// The status of `buf` when it is exactly one of hyper's automatic error answers: a status
/// line, `connection: close`, `content-length: 0`, and nothing after the head. Our own
/// handlers never answer an error without a body.
fn automatic_answer(buf: &[u8]) -> Option<StatusCode> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    explanation(status)?;
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    if head_end + 4 != buf.len() {
        return None;
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    (head.contains("\r\nconnection: close") && head.contains("\r\ncontent-length: 0"))
        .then_some(status)
}

/// The response written in place of hyper's automatic answer with this `status`.
fn shaped(status: StatusCode, original: &[u8]) -> Vec<u8> {
    let message = explanation(status).unwrap_or("bad request");
    let request_id = new_id("req");
    let body = ApiError::invalid(message)
        .with_status(status)
        .body(&request_id)
        .to_string();
    tracing::info!(status = status.as_u16(), %request_id, "{message}");
    let date = String::from_utf8_lossy(original)
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("date:"))
        .map(|l| format!("{}\r\n", l.trim_end()))
        .unwrap_or_default();
    let reason = status.canonical_reason().unwrap_or("");
    format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\nrequest-id: {request_id}\r\nconnection: close\r\ncontent-length: {}\r\n{date}\r\n{body}",
        status.as_u16(),
        body.len()
    )
    .into_bytes()
}

/// A connection whose automatic error answers are rewritten (see the module docs).
pub struct EdgeIo<T> {
    inner: T,
    /// A rewritten answer still to be written, and how much of it is out.
    pending: Vec<u8>,
    sent: usize,
}

impl<T: AsyncWrite + Unpin> EdgeIo<T> {
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for EdgeIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for EdgeIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.drain(cx))?;
        if let Some(status) = automatic_answer(buf) {
            self.pending = shaped(status, buf);
            // Whatever does not go out now goes out on the flush hyper makes next.
            if let Poll::Ready(Err(e)) = self.drain(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    // Not vectored: hyper then writes each response head in one buffer of its own, which is
    // what lets an automatic answer be recognised whole.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

/// A listener whose connections are [`EdgeIo`]s.
pub struct EdgeListener<L>(pub L);

impl<L: Listener> Listener for EdgeListener<L> {
    type Io = EdgeIo<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (inner, addr) = self.0.accept().await;
        let io = EdgeIo {
            inner,
            pending: Vec::new(),
            sent: 0,
        };
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bare_answers_are_recognised() {
        let auto = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 04:42:03 GMT\r\n\r\n";
        assert_eq!(
            automatic_answer(auto),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(automatic_answer(ours), None);
        let ok = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(automatic_answer(ok), None);
        let text = String::from_utf8(shaped(StatusCode::URI_TOO_LONG, auto)).unwrap();
        assert!(text.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{text}");
        assert!(text.contains("date: Tue, 01 Dec 2026"), "{text}");
        let body: serde_json::Value =
            serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(body["request_id"].as_str().unwrap().starts_with("req_"));
    }
}
