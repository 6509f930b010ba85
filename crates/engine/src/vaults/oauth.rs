//! The OAuth 2.0 refresh-token grant (RFC 6749 §6) against a credential's token endpoint,
//! with the client authentication the credential names: `none` (client id in the body),
//! `client_secret_basic` (HTTP Basic) or `client_secret_post` (id and secret in the body).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use super::outbound::{Outbound, Unreachable, capture};
use mast_domain::credential::{OAuthRefresh, Secrets, TokenEndpointAuth};
use mast_domain::credential_validation::HttpCapture;

/// What a token endpoint issued. `Debug` prints no token.
#[derive(Deserialize)]
pub(super) struct Tokens {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Seconds from now.
    #[serde(default)]
    pub expires_in: Option<i64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// How a refresh went.
#[derive(Debug)]
pub(super) enum Refresh {
    Issued(Tokens),
    /// The endpoint answered, but not with tokens (the response, scrubbed).
    Refused(HttpCapture),
    /// No answer (address refused, connection, timeout).
    Unreachable(String),
    /// The credential has no refresh token or refresh settings.
    NotPossible,
}

/// `application/x-www-form-urlencoded` percent-encoding, as Basic client auth requires of the
/// id and secret before they are joined (RFC 6749 §2.3.1).
fn form_encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Exchanges the refresh token for new tokens.
pub(super) async fn refresh(
    http: &Outbound,
    config: Option<&OAuthRefresh>,
    secrets: &Secrets,
) -> Refresh {
    let (Some(config), Some(refresh_token)) = (config, secrets.refresh_token.as_deref()) else {
        return Refresh::NotPossible;
    };
    let client_secret = secrets.client_secret.as_deref().unwrap_or_default();
    let (body, basic) = request_body(config, refresh_token, client_secret);
    let req = match http.post(&config.token_endpoint) {
        Ok(r) => r,
        Err(Unreachable(why)) => return Refresh::Unreachable(why),
    };
    let mut req = req
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body);
    if let Some(b) = basic {
        req = req.header(reqwest::header::AUTHORIZATION, b);
    }
    let resp = match http.send(req).await {
        Ok(r) => r,
        Err(Unreachable(why)) => return Refresh::Unreachable(why),
    };
    let known = [refresh_token, client_secret, secrets.token.as_str()];
    if !resp.status().is_success() {
        return Refresh::Refused(capture(resp, &known).await);
    }
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap_or_default();
    match serde_json::from_slice::<Tokens>(&bytes) {
        Ok(t) if !t.access_token.is_empty() => Refresh::Issued(t),
        // A success without an access token is a refusal; its body is not quoted (it may
        // hold tokens in a shape not recognised).
        _ => Refresh::Refused(HttpCapture {
            status_code: status,
            content_type: "application/json".into(),
            body: "the token endpoint's answer holds no `access_token`".into(),
            body_truncated: false,
        }),
    }
}

/// The form body of the grant and, for `client_secret_basic`, the `Authorization` value.
fn request_body(
    config: &OAuthRefresh,
    refresh_token: &str,
    client_secret: &str,
) -> (String, Option<String>) {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "refresh_token");
    form.append_pair("refresh_token", refresh_token);
    if let Some(scope) = &config.scope {
        form.append_pair("scope", scope);
    }
    if let Some(resource) = &config.resource {
        form.append_pair("resource", resource);
    }
    let mut basic = None;
    match config.token_endpoint_auth {
        TokenEndpointAuth::None => {
            form.append_pair("client_id", &config.client_id);
        }
        TokenEndpointAuth::ClientSecretPost => {
            form.append_pair("client_id", &config.client_id);
            form.append_pair("client_secret", client_secret);
        }
        TokenEndpointAuth::ClientSecretBasic => {
            let pair = format!(
                "{}:{}",
                form_encode(&config.client_id),
                form_encode(client_secret)
            );
            basic = Some(format!("Basic {}", STANDARD.encode(pair)));
        }
    }
    (form.finish(), basic)
}
