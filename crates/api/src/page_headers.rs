//! The headers that keep what this server sends a browser from being used against it: pages
//! (the console, the API reference) under a strict Content Security Policy and never framed,
//! and downloads of users' bytes never sniffed or rendered as a page of this origin.

use axum::http::{HeaderMap, HeaderValue, header};

/// The API reference's policy: Redoc's bundle from this server only, the inline styles it
/// injects, its search worker (a `blob:` URL), and nothing from elsewhere.
pub const DOCS_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A downloaded file's policy: should a browser open it anyway, it runs nothing and is a
/// unique origin of its own (`sandbox`), so a file a user uploaded as `text/html` cannot
/// script this server's origin.
pub const DOWNLOAD_CSP: &str = "default-src 'none'; sandbox";

/// Adds a page's protections: its `csp`, no framing, no type sniffing, no referrer.
pub fn page(headers: &mut HeaderMap, csp: &'static str) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

/// Adds a download's protections: its declared type only (`nosniff`) and [`DOWNLOAD_CSP`]. The
/// caller sends it as an attachment, which browsers save rather than show.
pub fn download(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DOWNLOAD_CSP),
    );
}
