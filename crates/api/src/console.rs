//! `/console`: the web console, a static single-page client of Mast's own public API. Its files
//! (`assets/console/`: plain ES modules and CSS, no build step) are compiled into the binary, so
//! the page works without network access. The shell needs no API key — a browser navigation
//! cannot send one — and carries no data: every piece of data is fetched by the page through the
//! authenticated `/v1` API with the key the user signs in with.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::AppState;

/// One embedded file: name under `/console/`, content type, bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $ct:expr) => {
        Asset {
            name: $name,
            content_type: $ct,
            bytes: include_bytes!(concat!("../assets/console/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the console (a unit test checks this list against the folder).
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("diff.js", JS),
    asset!("transcript.js", JS),
    asset!("session.js", JS),
    asset!("lists.js", JS),
];

/// The page may load only its own scripts and styles (no inline code, so no `unsafe-inline`),
/// talk only to this server, and not be framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Strong ETags (a hash of each file), computed once.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let h = Sha256::digest(a.bytes);
                let hex: String = h[..12].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    let asset = &ASSETS[i];
    let etag = &etags()[i];
    // Every file revalidates (`no-cache`) against its ETag: a new binary's files are picked
    // up at once, and an unchanged file costs a 304.
    let common = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::ETAG, HeaderValue::from_str(etag).expect("hex")),
    ];
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if matches {
        (StatusCode::NOT_MODIFIED, common).into_response()
    } else {
        (
            common,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.bytes,
        )
            .into_response()
    };
    super::page_headers::page(resp.headers_mut(), CSP);
    resp
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

/// Routes of the console (no API key needed for the static files; see the module doc).
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route("/console/", get(index))
        .route("/console/{name}", get(file))
        .route("/", get(front_page))
}

/// `GET /`: a browser is sent to the console, since that is what a person opening the
/// server's address wants; an API client gets the usual 404 naming where the routes are.
async fn front_page(
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let browser = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"));
    if browser {
        return Redirect::to("/console/").into_response();
    }
    crate::no_route(method, uri).await.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_the_folder_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/console");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
    }

    #[test]
    fn etags_differ_per_file_and_revalidate() {
        let tag = etags()[0].clone();
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&tag).unwrap());
        assert_eq!(serve("index.html", &h).status(), StatusCode::NOT_MODIFIED);
        assert_eq!(serve("app.js", &h).status(), StatusCode::OK);
        assert_eq!(serve("nope.js", &h).status(), StatusCode::NOT_FOUND);
    }
}
