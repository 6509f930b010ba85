//! What a web page on another site could make a visitor's browser send, refused.
//!
//! A browser sends a cross-site `POST` without asking first (no CORS preflight) when its body
//! is `text/plain`, form-encoded or `multipart/form-data`, and it lets a page whose name was
//! re-pointed at 127.0.0.1 (DNS rebinding) call this server as if it were its own. With an API
//! key that does nothing — a page cannot attach the key — but in open mode every request is
//! trusted, so there:
//! - the `Host` must be a loopback name or address, this server's own address, or one the
//!   operator listed (`MAST_ALLOWED_HOSTS`): a rebinding page's requests carry its own name;
//! - an `Origin`, when a browser sends one, must be this server's own: the console's calls
//!   pass, another site's are refused.
//!
//! Bodies are JSON only in every mode (see [`super::extract`]), so a page cannot even shape a
//! request the API would read. With `MAST_ALLOWED_HOSTS` set the `Host` check applies to every
//! request (a keyed deployment behind a proxy; loopback names and the server's own addresses
//! still answer), except the probes (`/healthz`, `/readyz`, `/metrics`), which orchestrators
//! call by address.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;

/// Which hosts a request may name.
#[derive(Debug, Clone, Default)]
pub struct HostRules {
    /// `MAST_ALLOWED_HOSTS`: names (or `*.suffix` patterns) and addresses, lowercase, without
    /// ports. Empty: any host in keyed mode, loopback and the server's own addresses in open
    /// mode.
    pub allowed: Vec<String>,
    /// Addresses of this machine a client may use by number (the listening address, or every
    /// interface's when it listens on all): an address cannot be re-pointed by DNS.
    pub own_addresses: Vec<IpAddr>,
}

impl HostRules {
    /// The rules for a server listening on `listen` with `allowed` hosts configured.
    pub fn new(listen: IpAddr, allowed: Vec<String>) -> Self {
        let own_addresses = if listen.is_unspecified() {
            if_addrs::get_if_addrs()
                .map(|ifs| ifs.into_iter().map(|i| i.ip()).collect())
                .unwrap_or_default()
        } else {
            vec![listen]
        };
        HostRules {
            allowed: allowed
                .into_iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            own_addresses,
        }
    }

    /// Whether `host` (no port) is one the operator listed.
    fn listed(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.allowed.iter().any(|a| match a.strip_prefix("*.") {
            Some(suffix) => host
                .strip_suffix(suffix)
                .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
            None => a == host,
        })
    }

    /// Whether a request naming `host` (no port) may be served in open mode, and with
    /// `MAST_ALLOWED_HOSTS` set in any mode: a loopback name or address, this server's own
    /// address, or a listed name.
    fn open_mode_allows(&self, host: &str) -> bool {
        if host == "localhost" || host.ends_with(".localhost") || self.listed(host) {
            return true;
        }
        match parse_ip(host) {
            Some(ip) => ip.is_loopback() || self.own_addresses.contains(&ip),
            None => false,
        }
    }
}

/// `host` as an IP address, brackets of an IPv6 literal removed.
fn parse_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The `Host` a request names, lowercase, and its host part without the port.
fn host_of(headers: &HeaderMap) -> Option<(String, String)> {
    let full = headers
        .get(header::HOST)?
        .to_str()
        .ok()?
        .trim()
        .to_ascii_lowercase();
    let name = if full.starts_with('[') {
        full.split_once(']').map(|(h, _)| format!("{h}]"))?
    } else {
        full.rsplit_once(':')
            .map_or(full.clone(), |(h, _)| h.to_string())
    };
    let name = name.trim_end_matches('.').to_string();
    Some((full, name))
}

/// The `host[:port]` of an `Origin` header, lowercase; None for `null` and anything that is
/// not an http(s) origin.
fn origin_authority(origin: &str) -> Option<String> {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))?;
    (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_ascii_lowercase())
}

/// The authority of `Host` with the scheme's default port left out, as browsers write origins.
fn without_default_port(authority: &str) -> &str {
    authority
        .strip_suffix(":80")
        .or_else(|| authority.strip_suffix(":443"))
        .unwrap_or(authority)
}

/// Why an open-mode request is refused, if it is.
pub fn open_mode_refusal(rules: &HostRules, headers: &HeaderMap) -> Option<ApiError> {
    let Some((full, name)) = host_of(headers) else {
        return Some(ApiError::forbidden(
            "this server runs without API keys and answers only requests that name it by a loopback address \
             (a `Host` header is required)",
        ));
    };
    if !rules.open_mode_allows(&name) {
        return Some(ApiError::forbidden(format!(
            "this server runs without API keys and answers only requests that name it by a loopback \
             address or its own address, not `{name}` (a web page can re-point its own name at this \
             machine); call it as http://127.0.0.1 or http://localhost, list the name in \
             MAST_ALLOWED_HOSTS, or create an API key with `mast keys create`"
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(origin_authority)
            .is_some_and(|o| without_default_port(&o) == without_default_port(&full));
        if !same {
            let shown = origin.to_str().unwrap_or("(not text)");
            return Some(ApiError::forbidden(format!(
                "this server runs without API keys and refuses requests a web page on another site \
                 (`Origin: {shown}`) makes; only its own pages (the console) may call it from a browser. \
                 Create an API key with `mast keys create` to call it from elsewhere"
            )));
        }
    }
    None
}

/// Middleware: with `MAST_ALLOWED_HOSTS` set, refuses a request naming a host that is neither
/// listed nor a loopback name or this server's own address (the probes excepted).
pub async fn allowed_hosts(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let rules = app.auth.host_rules();
    if rules.allowed.is_empty() || matches!(req.uri().path(), "/healthz" | "/readyz" | "/metrics") {
        return next.run(req).await;
    }
    let named = host_of(req.headers());
    let ok = named
        .as_ref()
        .is_some_and(|(_, name)| rules.open_mode_allows(name));
    if ok {
        return next.run(req).await;
    }
    let shown = named.map_or_else(|| "(none)".to_string(), |(full, _)| full);
    ApiError::forbidden(format!(
        "`Host: {shown}` is not one of this server's names (MAST_ALLOWED_HOSTS)"
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn open_mode_answers_loopback_names_and_its_own_pages_only() {
        let rules = HostRules::new("127.0.0.1".parse().unwrap(), vec!["mast.internal".into()]);
        let allowed = [
            (Some("127.0.0.1:8080"), None),
            (Some("localhost:8080"), None),
            (Some("LOCALHOST"), None),
            (Some("app.localhost:1"), None),
            (Some("[::1]:8080"), None),
            (Some("127.0.0.2"), None),
            (Some("mast.internal:8080"), None),
            (Some("127.0.0.1:8080"), Some("http://127.0.0.1:8080")),
            (Some("localhost"), Some("http://localhost")),
            (Some("localhost:80"), Some("http://localhost")),
        ];
        for (host, origin) in allowed {
            assert!(
                open_mode_refusal(&rules, &headers(host, origin)).is_none(),
                "{host:?} {origin:?}"
            );
        }
        let refused = [
            (None, None),
            (Some("evil.example:8080"), None),
            (Some("127.0.0.1.evil.example"), None),
            (Some("localhost.evil.example"), None),
            (Some("10.1.2.3:8080"), None),
            (Some("127.0.0.1:8080"), Some("http://evil.example")),
            (Some("127.0.0.1:8080"), Some("http://127.0.0.1:9999")),
            (Some("127.0.0.1:8080"), Some("null")),
            (Some("127.0.0.1:8080"), Some("file://")),
        ];
        for (host, origin) in refused {
            assert!(
                open_mode_refusal(&rules, &headers(host, origin)).is_some(),
                "{host:?} {origin:?}"
            );
        }
    }

    #[test]
    fn listed_patterns_match_whole_labels() {
        let rules = HostRules::new(
            "127.0.0.1".parse().unwrap(),
            vec!["*.example.com".into(), " API.example.org ".into()],
        );
        assert!(rules.listed("a.example.com"));
        assert!(rules.listed("a.b.example.com"));
        assert!(!rules.listed("example.com"));
        assert!(!rules.listed("evilexample.com"));
        assert!(rules.listed("api.example.org"));
    }
}
