//! Signed outbound HTTP calls in the Standard Webhooks scheme (<https://www.standardwebhooks.com>),
//! shared by webhook deliveries and hook calls: the same `whsec_…` signing secrets, the same
//! `webhook-id` / `webhook-timestamp` / `webhook-signature` headers the official SDK's
//! `webhooks.unwrap` and the `standardwebhooks` package verify, and the same guarded client
//! (the tools' address rules, no proxy, no redirects).
//!
//! The signature is `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")) where the key
//! is the base64 text after `whsec_`. Several signatures may be sent at once, separated by
//! spaces: during a secret rotation both the new and the old secret sign, so a receiver that
//! has either verifies.
//!
//! ## Hand-written, and why
//!
//! The `standardwebhooks` crate (the specification's reference library) signs with the same
//! bytes — its own test vector is pinned below, and 100,000 random inputs matched — but it was
//! not taken for the signing, the only part of this module it covers. Its `sign` refuses a body
//! that is not UTF-8 (so it is fallible where this is not), copies the body into the signed
//! string, and computes the HMAC with the portable `hmac-sha256` where `sha2` uses the CPU's
//! SHA instructions: 5 to 11 times the time per signature (BENCHMARKS.md, "Crates against
//! hand-written code"). It would also add a second base64 major and a second SHA-256 to the
//! build, for a dozen lines; the secrets' generation, bounds and redaction, and the guarded
//! client, are Mast's in either case.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore as _;
use sha2::Sha256;

use mast_sandbox::netguard::NetGuard;

/// The prefix of every signing secret's text.
pub const SECRET_PREFIX: &str = "whsec_";

/// Longest part of a receiver's response body that is kept.
const BODY_QUOTE: usize = 1024;

/// A signing secret: its key bytes, shown to users as `whsec_` + base64.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret {
    key: Vec<u8>,
}

// The key never reaches a log line through `{:?}`.
impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

impl SigningSecret {
    /// A new random secret (32 bytes).
    pub fn generate() -> Self {
        let mut key = vec![0u8; 32];
        rand::rng().fill_bytes(&mut key);
        SigningSecret { key }
    }

    /// Parses `whsec_<base64>` (the prefix is optional, as receivers' libraries accept both).
    pub fn parse(text: &str) -> Result<Self, String> {
        let b64 = text.strip_prefix(SECRET_PREFIX).unwrap_or(text);
        let key = STANDARD
            .decode(b64)
            .map_err(|_| format!("a signing secret is `{SECRET_PREFIX}` followed by base64"))?;
        if key.len() < 16 || key.len() > 64 {
            return Err("a signing secret's key is 16 to 64 bytes".into());
        }
        Ok(SigningSecret { key })
    }

    /// The secret as users see and configure it: `whsec_<base64>`.
    pub fn expose(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    /// The `v1,<base64>` signature of one message.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The value of the `webhook-signature` header: one signature per secret, space-separated.
pub fn signature_header(
    secrets: &[SigningSecret],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|s| s.sign(msg_id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a receiver answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The start of the response body (at most 1 KiB unless the caller asked for more, lossy
    /// UTF-8).
    pub body: String,
    /// From sending the request to the end of the (quoted part of the) body.
    pub latency: Duration,
}

/// Why a signed call got no HTTP answer (refused address, connect error, timeout, …).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Unanswered {
    /// What went wrong, naming no secret.
    pub message: String,
    /// How long it took to fail.
    pub latency: Duration,
}

/// A client for signed JSON POSTs through the address guard.
#[derive(Clone)]
pub struct SignedPoster {
    client: reqwest::Client,
    guard: NetGuard,
}

impl SignedPoster {
    /// A client whose connections pass `guard` (loopback and private addresses only where the
    /// operator allows them).
    pub fn new(guard: NetGuard) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("Mast/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .dns_resolver(Arc::new(guard))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client");
        SignedPoster { client, guard }
    }

    /// Checks that `url` is an http(s) URL whose literal address (if it has one) the guard
    /// allows. Names are checked when they are resolved, at each call.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, String> {
        let parsed =
            reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("`{url}` is not an http(s) URL"));
        }
        let host = parsed.host_str().unwrap_or_default();
        if host.is_empty() {
            return Err(format!("`{url}` has no host"));
        }
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
            self.guard.check(ip)?;
        }
        Ok(parsed)
    }

    /// POSTs `body` (JSON) to `url`, signed by each of `secrets`, waiting at most `timeout`
    /// for the whole answer.
    pub async fn post(
        &self,
        url: &str,
        msg_id: &str,
        body: &[u8],
        secrets: &[SigningSecret],
        timeout: Duration,
    ) -> Result<Answer, Unanswered> {
        self.post_reading(url, msg_id, body, secrets, timeout, BODY_QUOTE)
            .await
    }

    /// [`SignedPoster::post`], keeping up to `limit` bytes of the answer's body (a hook's
    /// answer is read, not only quoted).
    pub async fn post_reading(
        &self,
        url: &str,
        msg_id: &str,
        body: &[u8],
        secrets: &[SigningSecret],
        timeout: Duration,
        limit: usize,
    ) -> Result<Answer, Unanswered> {
        let started = Instant::now();
        let fail = |message: String| Unanswered {
            message,
            latency: started.elapsed(),
        };
        let parsed = self.check_url(url).map_err(fail)?;
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
        let request = self
            .client
            .post(parsed)
            .timeout(timeout)
            .header("content-type", "application/json")
            .header("webhook-id", msg_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                signature_header(secrets, msg_id, timestamp, body),
            )
            .body(body.to_vec());
        let call = async {
            let response = request.send().await.map_err(|e| describe(&e))?;
            let status = response.status().as_u16();
            let mut quoted = Vec::new();
            let mut response = response;
            while quoted.len() < limit {
                match response.chunk().await {
                    Ok(Some(chunk)) => quoted.extend_from_slice(&chunk),
                    Ok(None) => break,
                    Err(e) => return Err(describe(&e)),
                }
            }
            quoted.truncate(limit);
            Ok((status, String::from_utf8_lossy(&quoted).into_owned()))
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok((status, body))) => Ok(Answer {
                status,
                body,
                latency: started.elapsed(),
            }),
            Ok(Err(message)) => Err(fail(message)),
            Err(_) => Err(fail(format!("no answer within {} ms", timeout.as_millis()))),
        }
    }
}

/// A transport error in words that name the cause (refused address, timeout, connect error)
/// and never a header.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    format!("{kind}: {}", mast_domain::error_chain::chain(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from the Standard Webhooks specification's reference libraries.
    #[test]
    fn signs_like_the_reference_libraries() {
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    /// The `standardwebhooks` crate's own test vector, and the header a rotation sends for it
    /// (the second secret is the first vector's): what receivers using that crate check.
    #[test]
    fn signs_like_the_standardwebhooks_crate() {
        let secret = SigningSecret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        let (id, ts) = ("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553);
        let body = br#"{"email":"test@example.com","username":"test_user"}"#;
        assert_eq!(
            secret.sign(id, ts, body),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
        let old = SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            signature_header(&[secret, old], id, ts, body),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw= \
             v1,bmED0YkXIwCHhhZjbHn8qMCbczjpYwHGju/WMUmDqOQ="
        );
    }

    #[test]
    fn a_generated_secret_round_trips_through_its_text() {
        let s = SigningSecret::generate();
        let text = s.expose();
        assert!(text.starts_with("whsec_"));
        assert_eq!(SigningSecret::parse(&text).unwrap(), s);
        assert!(!format!("{s:?}").contains(&text[6..]));
    }

    #[test]
    fn rotation_sends_one_signature_per_secret() {
        let (a, b) = (SigningSecret::generate(), SigningSecret::generate());
        let h = signature_header(&[a.clone(), b.clone()], "msg_1", 1, b"{}");
        assert_eq!(
            h,
            format!(
                "{} {}",
                a.sign("msg_1", 1, b"{}"),
                b.sign("msg_1", 1, b"{}")
            )
        );
    }

    #[test]
    fn bad_secrets_and_urls_are_refused() {
        assert!(SigningSecret::parse("whsec_!!").is_err());
        assert!(SigningSecret::parse("whsec_AAAA").is_err());
        let poster = SignedPoster::new(NetGuard::default());
        assert!(poster.check_url("ftp://example.com/").is_err());
        assert!(poster.check_url("http://127.0.0.1:9/").is_err());
        assert!(poster.check_url("not a url").is_err());
        assert!(poster.check_url("https://example.com/hook").is_ok());
    }
}
