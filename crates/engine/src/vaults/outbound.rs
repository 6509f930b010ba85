//! Requests to token endpoints and MCP servers: through the tools' address guard (loopback
//! and private addresses only with `MAST_ALLOW_PRIVATE_NETWORK=1`), no proxy, no redirects
//! (a redirect would carry a bearer token elsewhere), a bounded wait, and captured responses
//! scrubbed of secrets.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use mast_domain::credential_validation::HttpCapture;
use mast_sandbox::netguard::NetGuard;

/// Longest response body quoted back.
const BODY_QUOTE: usize = 2048;
/// How long one outbound request may take (a validation makes at most four in a row).
const TIMEOUT: Duration = Duration::from_secs(8);

/// Keys whose values are secrets wherever they appear in a quoted JSON body.
const SECRET_KEYS: [&str; 6] = [
    "access_token",
    "refresh_token",
    "id_token",
    "client_secret",
    "token",
    "password",
];

/// Why a request got no HTTP answer.
#[derive(Debug)]
pub(super) struct Unreachable(pub String);

/// The guarded client.
pub(super) struct Outbound {
    client: reqwest::Client,
    guard: NetGuard,
}

impl Outbound {
    pub(super) fn new(guard: NetGuard) -> Self {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(3))
            .user_agent(concat!("Mast/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .dns_resolver(Arc::new(guard))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client");
        Outbound { client, guard }
    }

    /// A POST to `url` (see [`Outbound::request`]).
    pub(super) fn post(&self, url: &str) -> Result<reqwest::RequestBuilder, Unreachable> {
        self.request(reqwest::Method::POST, url)
    }

    /// A request to `url` after the checks names cannot make (literal addresses never pass
    /// the resolver).
    pub(super) fn request(
        &self,
        method: reqwest::Method,
        url: &str,
    ) -> Result<reqwest::RequestBuilder, Unreachable> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Unreachable(format!("`{url}` is not a valid URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Unreachable(format!("`{url}` is not an http(s) URL")));
        }
        let host = parsed.host_str().unwrap_or_default();
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
            self.guard.check(ip).map_err(Unreachable)?;
        }
        Ok(self.client.request(method, parsed))
    }

    /// Sends `req`; transport failures become [`Unreachable`] with a message that names no
    /// header (so no token).
    pub(super) async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Unreachable> {
        req.send()
            .await
            .map_err(|e| Unreachable(mast_domain::error_chain::chain(&e.without_url())))
    }
}

/// A response captured for a validation report: status, content type and the body, its
/// secrets (`secrets`, and any value under a secret-looking JSON key) replaced.
pub(super) async fn capture(resp: reqwest::Response, secrets: &[&str]) -> HttpCapture {
    let status_code = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = resp.bytes().await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut body = scrub(&text, secrets);
    let body_truncated = body.chars().count() > BODY_QUOTE;
    if body_truncated {
        body = body.chars().take(BODY_QUOTE).collect();
    }
    HttpCapture {
        status_code,
        content_type,
        body,
        body_truncated,
    }
}

/// `text` with every known secret and every secret-looking JSON value replaced.
pub(super) fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = match serde_json::from_str::<Value>(text) {
        Ok(mut v) => {
            redact(&mut v);
            v.to_string()
        }
        Err(_) => text.to_string(),
    };
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(*s, "[redacted]");
    }
    out
}

fn redact(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                if SECRET_KEYS.contains(&k.as_str()) && !val.is_null() {
                    *val = Value::String("[redacted]".into());
                } else {
                    redact(val);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_known_secrets_and_token_fields() {
        let s = scrub(
            r#"{"error":"x","access_token":"abc","note":"sent s3cret-1"}"#,
            &["s3cret-1"],
        );
        assert!(!s.contains("abc") && !s.contains("s3cret-1"), "{s}");
        assert_eq!(
            scrub("plain s3cret-1 text", &["s3cret-1"]),
            "plain [redacted] text"
        );
    }
}
