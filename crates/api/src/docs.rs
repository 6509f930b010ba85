//! `/docs`: the API reference, rendered in the browser by Redoc from `/openapi.json`. Redoc's
//! standalone bundle (MIT, `assets/redoc/`) is compiled into the binary, so the page works
//! without network access.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;

/// The page: Redoc pointed at this server's own OpenAPI document.
const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mast API reference</title>
<style>body { margin: 0; }</style>
</head>
<body>
<redoc spec-url="/openapi.json" hide-download-button="false"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
"#;

/// Redoc 2.5.4's standalone bundle.
const REDOC: &[u8] = include_bytes!("../assets/redoc/redoc.standalone.js");

async fn page() -> Response {
    let mut resp = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response();
    super::page_headers::page(resp.headers_mut(), super::page_headers::DOCS_CSP);
    resp
}

async fn bundle() -> Response {
    let mut resp = (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        REDOC,
    )
        .into_response();
    super::page_headers::page(resp.headers_mut(), super::page_headers::DOCS_CSP);
    resp
}

/// Routes of the reference page (no API key needed, like `/openapi.json`).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/docs", get(page))
        .route("/docs/redoc.standalone.js", get(bundle))
}
