//! Closing a connection whose request body was left unread.
//!
//! A request refused before its handler reads the body (an authentication or access check, a
//! route that does not exist) leaves the rest of the body on the connection. hyper then closes
//! the connection after the response rather than parse that body as the next request, but the
//! response itself said nothing, so a client that pools connections sends its next request on
//! a socket about to close and reads "server disconnected". Saying `connection: close` on such
//! a response lets the client open a fresh connection instead.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// A request body that records when it has been read to its end.
struct Watched {
    inner: Body,
    finished: Arc<AtomicBool>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.finished.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether the request announces a body (a non-zero length, or a chunked one).
fn has_body(req: &Request) -> bool {
    let headers = req.headers();
    if headers.contains_key(TRANSFER_ENCODING) {
        return true;
    }
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > 0)
}

/// Middleware: marks `connection: close` on a response to a request whose body was not read
/// to its end by the time the response was ready.
pub async fn middleware(req: Request, next: Next) -> Response {
    if !has_body(&req) {
        return next.run(req).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let watched = Watched {
        inner: body,
        finished: finished.clone(),
    };
    let mut resp = next
        .run(Request::from_parts(parts, Body::new(watched)))
        .await;
    if !finished.load(Ordering::Relaxed) {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}
