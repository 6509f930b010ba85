//! Vault credentials: how a session authenticates to an MCP server.
//!
//! A credential has a public part ([`CredentialAuth`], what responses show) and a secret part
//! ([`Secrets`]: the token, refresh token and client secret), which is sealed before it is
//! stored and never serialized into a response, an event or a log line. Two kinds are
//! supported: `static_bearer` and `mcp_oauth` (with an optional `refresh`);
//! `environment_variable` credentials are refused (`unsupported_feature`), since nothing
//! substitutes secrets into sandbox egress yet.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{self, Metadata, MetadataPatch};
use super::patch::Patch;
use super::time;
use crate::type_tag;

type_tag!(
    /// `"type": "vault_credential"`.
    CredentialTag = "vault_credential"
);

/// Longest URL accepted for `mcp_server_url` and `token_endpoint`.
const MAX_URL: usize = 2048;
/// Longest token, refresh token or client secret accepted.
const MAX_SECRET: usize = 16 * 1024;

/// How a credential's client authenticates to its OAuth token endpoint (response form: the
/// client secret is never shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TokenEndpointAuth {
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

/// An `mcp_oauth` credential's refresh configuration, as shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OAuthRefresh {
    pub client_id: String,
    pub token_endpoint: String,
    pub token_endpoint_auth: TokenEndpointAuth,
    pub resource: Option<String>,
    pub scope: Option<String>,
}

/// A credential's `auth`, response form: no secret in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CredentialAuth {
    McpOauth {
        mcp_server_url: String,
        expires_at: Option<String>,
        refresh: Option<OAuthRefresh>,
    },
    StaticBearer {
        mcp_server_url: String,
    },
}

impl CredentialAuth {
    /// The MCP server this credential is for.
    pub fn server_url(&self) -> &str {
        match self {
            CredentialAuth::McpOauth { mcp_server_url, .. }
            | CredentialAuth::StaticBearer { mcp_server_url } => mcp_server_url,
        }
    }

    /// The wire name of its type.
    pub fn kind(&self) -> &'static str {
        match self {
            CredentialAuth::McpOauth { .. } => "mcp_oauth",
            CredentialAuth::StaticBearer { .. } => "static_bearer",
        }
    }

    /// The refresh configuration of an `mcp_oauth` credential.
    pub fn refresh(&self) -> Option<&OAuthRefresh> {
        match self {
            CredentialAuth::McpOauth { refresh, .. } => refresh.as_ref(),
            CredentialAuth::StaticBearer { .. } => None,
        }
    }

    /// When an `mcp_oauth` access token expires, if known.
    pub fn expires_at(&self) -> Option<time::Micros> {
        match self {
            CredentialAuth::McpOauth { expires_at, .. } => {
                expires_at.as_deref().and_then(time::parse)
            }
            CredentialAuth::StaticBearer { .. } => None,
        }
    }
}

/// A credential as returned: `type: vault_credential`, never a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Credential {
    #[serde(rename = "type")]
    pub tag: CredentialTag,
    pub id: String,
    pub vault_id: String,
    pub display_name: Option<String>,
    pub auth: CredentialAuth,
    pub metadata: Metadata,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// A credential's secret values: only ever sealed (stored) or sent to the credential's own
/// MCP server or token endpoint. `Debug` prints no value.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secrets {
    /// The static bearer token, or the OAuth access token.
    pub token: String,
    /// The OAuth refresh token.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// The OAuth client secret (`client_secret_basic` / `client_secret_post`).
    #[serde(default)]
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// `POST /v1/vaults/{id}/credentials` body. Unknown keys are refused at every depth.
/// `Debug` leaves `auth` (which holds the secrets) out.
#[derive(Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a credential object")]
pub struct CredentialCreate {
    /// `static_bearer` or `mcp_oauth` (`environment_variable` is not supported).
    #[schema(value_type = Object)]
    pub auth: Value,
    /// Up to 255 characters.
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// `POST /v1/vaults/{id}/credentials/{cid}` body. Unknown keys are refused at every depth.
/// `Debug` leaves `auth` (which holds the secrets) out.
#[derive(Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a credential update object")]
pub struct CredentialUpdate {
    /// The same `type` as stored; only the secret values, expiry and refresh settings change.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub auth: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub display_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
}

impl std::fmt::Debug for CredentialCreate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCreate")
            .field("auth", &"<redacted>")
            .field("display_name", &self.display_name)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl std::fmt::Debug for CredentialUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialUpdate")
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("display_name", &self.display_name)
            .field("metadata", &self.metadata)
            .finish()
    }
}

/// A credential's content after a create or an update, not stored yet.
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialSpec {
    pub auth: CredentialAuth,
    pub secrets: Secrets,
    pub display_name: Option<String>,
    pub metadata: Metadata,
}

/// The form under which credential URLs are compared with an MCP server's URL: trimmed,
/// scheme and host lower-cased, trailing slashes dropped.
pub fn normalize_url(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => return url.trim_end_matches('/').to_string(),
    };
    let (host, path) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = host.to_ascii_lowercase();
    let path = match path.find(['?', '#']) {
        Some(i) => format!("{}{}", path[..i].trim_end_matches('/'), &path[i..]),
        None => path.trim_end_matches('/').to_string(),
    };
    format!("{scheme}://{host}{path}")
}

/// An `http(s)://host…` URL of at most [`MAX_URL`] characters.
fn check_url(path: &str, url: &str) -> Valid<()> {
    check_len(path, url, 1, MAX_URL)?;
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(r)
            if !r.is_empty() && !r.starts_with('/') && !url.chars().any(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(Invalid::new(format!(
            "`{path}` must be an http:// or https:// URL with a host"
        ))),
    }
}

/// A required secret string: not empty, at most [`MAX_SECRET`] characters. Its value never
/// appears in the message.
fn secret(o: &Obj<'_>, key: &str) -> Valid<String> {
    let s = o.req_str(key)?;
    check_secret(&o.path(key), s)?;
    Ok(s.to_string())
}

fn check_secret(path: &str, s: &str) -> Valid<()> {
    if s.chars().count() > MAX_SECRET {
        return Err(Invalid::new(format!(
            "`{path}` must be at most {MAX_SECRET} characters"
        )));
    }
    if s.chars().any(|c| c.is_control()) {
        return Err(Invalid::new(format!(
            "`{path}` must not contain control characters"
        )));
    }
    Ok(())
}

/// An optional secret string (absent or `null` = `None`).
fn opt_secret(o: &Obj<'_>, key: &str) -> Valid<Option<String>> {
    match o.str(key)? {
        None => Ok(None),
        Some(s) => {
            check_len(&o.path(key), s, 1, MAX_SECRET)?;
            check_secret(&o.path(key), s)?;
            Ok(Some(s.to_string()))
        }
    }
}

/// An `expires_at` that must be in the future (`null`/absent = unknown).
fn expires_at(o: &Obj<'_>, now: time::Micros) -> Valid<Option<String>> {
    let Some(s) = o.str("expires_at")? else {
        return Ok(None);
    };
    let path = o.path("expires_at");
    let t = time::parse(s)
        .ok_or_else(|| Invalid::new(format!("`{path}` must be an RFC 3339 timestamp")))?;
    if t <= now {
        return Err(Invalid::new(format!("`{path}` must be in the future")));
    }
    Ok(Some(time::format(t)))
}

fn display_name(v: Option<&str>) -> Valid<Option<String>> {
    match v {
        None => Ok(None),
        Some(n) => {
            check_len("display_name", n, 0, 255)?;
            Ok(Some(n.to_string()))
        }
    }
}

/// Reads `token_endpoint_auth` of a create body: the type and, for basic/post, the secret.
fn endpoint_auth(at: &str, v: &Value) -> Valid<(TokenEndpointAuth, Option<String>)> {
    match tag(
        at,
        v,
        &["none", "client_secret_basic", "client_secret_post"],
    )? {
        "none" => {
            Obj::new(at, v, "a `none` token endpoint auth", &["type"])?;
            Ok((TokenEndpointAuth::None, None))
        }
        kind => {
            let o = Obj::new(
                at,
                v,
                "a client-secret token endpoint auth",
                &["type", "client_secret"],
            )?;
            let secret = secret(&o, "client_secret")?;
            let kind = if kind == "client_secret_basic" {
                TokenEndpointAuth::ClientSecretBasic
            } else {
                TokenEndpointAuth::ClientSecretPost
            };
            Ok((kind, Some(secret)))
        }
    }
}

fn opt_plain(o: &Obj<'_>, key: &str, max: usize) -> Valid<Option<String>> {
    match o.str(key)? {
        None => Ok(None),
        Some(s) => {
            check_len(&o.path(key), s, 0, max)?;
            Ok(Some(s.to_string()))
        }
    }
}

/// Reads the `auth` of a create body.
fn parse_auth(v: &Value, now: time::Micros) -> Valid<(CredentialAuth, Secrets)> {
    let at = "auth";
    match tag(
        at,
        v,
        &["mcp_oauth", "static_bearer", "environment_variable"],
    )? {
        "static_bearer" => {
            let o = Obj::new(
                at,
                v,
                "a static_bearer credential",
                &["type", "mcp_server_url", "token"],
            )?;
            let url = o.req_str("mcp_server_url")?;
            check_url(&o.path("mcp_server_url"), url)?;
            let token = secret(&o, "token")?;
            Ok((
                CredentialAuth::StaticBearer {
                    mcp_server_url: url.to_string(),
                },
                Secrets {
                    token,
                    ..Secrets::default()
                },
            ))
        }
        "mcp_oauth" => {
            let o = Obj::new(
                at,
                v,
                "an mcp_oauth credential",
                &[
                    "type",
                    "mcp_server_url",
                    "access_token",
                    "expires_at",
                    "refresh",
                ],
            )?;
            let url = o.req_str("mcp_server_url")?;
            check_url(&o.path("mcp_server_url"), url)?;
            let token = secret(&o, "access_token")?;
            let expires_at = expires_at(&o, now)?;
            let mut secrets = Secrets {
                token,
                ..Secrets::default()
            };
            let refresh = match o.get("refresh") {
                None => None,
                Some(r) => {
                    let rp = o.path("refresh");
                    let r = Obj::new(
                        &rp,
                        r,
                        "a refresh configuration",
                        &[
                            "client_id",
                            "refresh_token",
                            "token_endpoint",
                            "token_endpoint_auth",
                            "resource",
                            "scope",
                        ],
                    )?;
                    let client_id = r.req_str("client_id")?;
                    check_len(&r.path("client_id"), client_id, 1, 1024)?;
                    secrets.refresh_token = Some(secret(&r, "refresh_token")?);
                    let endpoint = r.req_str("token_endpoint")?;
                    check_url(&r.path("token_endpoint"), endpoint)?;
                    let auth_at = r.path("token_endpoint_auth");
                    let auth_v = r
                        .get("token_endpoint_auth")
                        .ok_or_else(|| Invalid::new(format!("`{auth_at}` is required")))?;
                    let (auth, client_secret) = endpoint_auth(&auth_at, auth_v)?;
                    secrets.client_secret = client_secret;
                    Some(OAuthRefresh {
                        client_id: client_id.to_string(),
                        token_endpoint: endpoint.to_string(),
                        token_endpoint_auth: auth,
                        resource: opt_plain(&r, "resource", MAX_URL)?,
                        scope: opt_plain(&r, "scope", 4096)?.filter(|s| !s.is_empty()),
                    })
                }
            };
            Ok((
                CredentialAuth::McpOauth {
                    mcp_server_url: url.to_string(),
                    expires_at,
                    refresh,
                },
                secrets,
            ))
        }
        _ => Err(Invalid::unsupported(
            "auth.type",
            "environment_variable_credentials",
            "this server does not inject environment-variable secrets into sandbox traffic; \
             use `static_bearer` or `mcp_oauth` credentials for MCP servers",
        )),
    }
}

impl CredentialCreate {
    /// Validates the body at time `now` (an `expires_at` must be later).
    pub fn into_spec(self, now: time::Micros) -> Valid<CredentialSpec> {
        let (auth, secrets) = parse_auth(&self.auth, now)?;
        let metadata = self.metadata.unwrap_or_default();
        metadata::validate(&metadata)?;
        Ok(CredentialSpec {
            auth,
            secrets,
            display_name: display_name(self.display_name.as_deref())?,
            metadata,
        })
    }
}

/// Applies the `auth` of an update to the stored auth and secrets.
fn apply_auth(
    v: &Value,
    auth: &mut CredentialAuth,
    secrets: &mut Secrets,
    now: time::Micros,
) -> Valid<()> {
    let at = "auth";
    let sent = tag(
        at,
        v,
        &["mcp_oauth", "static_bearer", "environment_variable"],
    )?;
    if sent != auth.kind() {
        return Err(Invalid::new(format!(
            "`auth.type` must be `{}`: a credential's type cannot change (got `{sent}`)",
            auth.kind()
        )));
    }
    match auth {
        CredentialAuth::StaticBearer { .. } => {
            let o = Obj::new(
                at,
                v,
                "a static_bearer credential update",
                &["type", "token"],
            )?;
            if let Some(t) = opt_secret(&o, "token")? {
                secrets.token = t;
            }
        }
        CredentialAuth::McpOauth {
            expires_at: stored_expiry,
            refresh,
            ..
        } => {
            let o = Obj::new(
                at,
                v,
                "an mcp_oauth credential update",
                &["type", "access_token", "expires_at", "refresh"],
            )?;
            if let Some(t) = opt_secret(&o, "access_token")? {
                secrets.token = t;
            }
            match o.raw("expires_at") {
                None => {}
                Some(Value::Null) => *stored_expiry = None,
                Some(_) => *stored_expiry = expires_at(&o, now)?,
            }
            if let Some(r) = o.get("refresh") {
                let rp = o.path("refresh");
                let Some(stored) = refresh.as_mut() else {
                    return Err(Invalid::new(format!(
                        "`{rp}` cannot be set: this credential was created without refresh \
                         settings (its `client_id` and `token_endpoint` are fixed at creation); \
                         create a new credential instead"
                    )));
                };
                let r = Obj::new(
                    &rp,
                    r,
                    "a refresh update",
                    &["refresh_token", "scope", "token_endpoint_auth"],
                )?;
                if let Some(t) = opt_secret(&r, "refresh_token")? {
                    secrets.refresh_token = Some(t);
                }
                if let Some(s) = opt_plain(&r, "scope", 4096)? {
                    stored.scope = (!s.is_empty()).then_some(s);
                }
                if let Some(a) = r.get("token_endpoint_auth") {
                    let ap = r.path("token_endpoint_auth");
                    tag(&ap, a, &["client_secret_basic", "client_secret_post"])?;
                    let a = Obj::new(
                        &ap,
                        a,
                        "a client-secret token endpoint auth update",
                        &["type", "client_secret"],
                    )?;
                    if stored.token_endpoint_auth == TokenEndpointAuth::None {
                        return Err(Invalid::new(format!(
                            "`{ap}` cannot be changed: this credential's token endpoint takes no \
                             client authentication (`none`)"
                        )));
                    }
                    // The stored method is kept even when the other one is sent (SDK docs).
                    if let Some(s) = opt_secret(&a, "client_secret")? {
                        secrets.client_secret = Some(s);
                    }
                }
            }
        }
    }
    Ok(())
}

impl CredentialUpdate {
    /// Applies the update to the stored credential (not archived) and its secrets.
    pub fn apply(
        self,
        current: &Credential,
        secrets: &Secrets,
        now: time::Micros,
    ) -> Valid<CredentialSpec> {
        if current.archived_at.is_some() {
            return Err(Invalid::with_code(
                "credential_archived",
                format!(
                    "credential `{}` is archived: it cannot be updated",
                    current.id
                ),
            ));
        }
        let mut auth = current.auth.clone();
        let mut secrets = secrets.clone();
        if let Some(v) = self.auth.as_ref().filter(|v| !v.is_null()) {
            if !v.is_object() {
                return Err(must_be("auth", "an object", v));
            }
            apply_auth(v, &mut auth, &mut secrets, now)?;
        }
        let display_name = match self.display_name {
            Patch::Absent => current.display_name.clone(),
            Patch::Null => None,
            Patch::Value(n) => {
                check_len("display_name", &n, 1, 255)?;
                Some(n)
            }
        };
        let metadata = match &self.metadata {
            Some(p) => metadata::apply_patch(&current.metadata, p, false)?,
            None => current.metadata.clone(),
        };
        Ok(CredentialSpec {
            auth,
            secrets,
            display_name,
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: time::Micros = 1_800_000_000_000_000;

    fn create(v: Value) -> Valid<CredentialSpec> {
        serde_json::from_value::<CredentialCreate>(v)
            .unwrap()
            .into_spec(NOW)
    }

    fn oauth() -> Value {
        json!({"auth": {"type": "mcp_oauth", "mcp_server_url": "https://mcp.example.com/mcp",
            "access_token": "at-1", "expires_at": "2099-01-01T00:00:00Z",
            "refresh": {"client_id": "cid", "refresh_token": "rt-1",
                "token_endpoint": "https://auth.example.com/token",
                "token_endpoint_auth": {"type": "client_secret_post", "client_secret": "cs-1"},
                "scope": "read"}}})
    }

    #[test]
    fn responses_hold_no_secret() {
        let spec = create(oauth()).unwrap();
        let shown = serde_json::to_string(&spec.auth).unwrap();
        for s in ["at-1", "rt-1", "cs-1"] {
            assert!(!shown.contains(s), "{shown}");
        }
        assert_eq!(spec.secrets.token, "at-1");
        assert_eq!(spec.secrets.refresh_token.as_deref(), Some("rt-1"));
        assert_eq!(spec.secrets.client_secret.as_deref(), Some("cs-1"));
        let body: CredentialCreate = serde_json::from_value(oauth()).unwrap();
        let debug = format!("{:?} {:?}", spec, body);
        for s in ["at-1", "rt-1", "cs-1"] {
            assert!(!debug.contains(s), "{debug}");
        }
        assert_eq!(
            serde_json::to_value(&spec.auth).unwrap(),
            json!({"type": "mcp_oauth", "mcp_server_url": "https://mcp.example.com/mcp",
                "expires_at": "2099-01-01T00:00:00Z",
                "refresh": {"client_id": "cid", "token_endpoint": "https://auth.example.com/token",
                    "token_endpoint_auth": {"type": "client_secret_post"}, "resource": null, "scope": "read"}})
        );
    }

    #[test]
    fn create_is_strict() {
        let field = |v| {
            let e = create(v).unwrap_err();
            (e.code, e.message)
        };
        let (code, _) = field(
            json!({"auth": {"type": "static_bearer", "mcp_server_url": "https://x", "token": "t", "tokn": 1}}),
        );
        assert_eq!(code, Some("unknown_field"));
        let (_, m) = field(
            json!({"auth": {"type": "static_bearer", "mcp_server_url": "ftp://x", "token": "t"}}),
        );
        assert!(m.contains("http"), "{m}");
        let (_, m) = field(
            json!({"auth": {"type": "mcp_oauth", "mcp_server_url": "https://x", "access_token": "t", "expires_at": "2001-01-01T00:00:00Z"}}),
        );
        assert!(m.contains("future"), "{m}");
        let (code, _) =
            field(json!({"auth": {"type": "environment_variable", "secret_name": "A"}}));
        assert_eq!(code, Some("unsupported_feature"));
        let (_, m) = field(
            json!({"auth": {"type": "mcp_oauth", "mcp_server_url": "https://x", "access_token": "t",
            "refresh": {"client_id": "c", "refresh_token": "r", "token_endpoint": "https://a",
                "token_endpoint_auth": {"type": "client_secret_basic"}}}}),
        );
        assert!(m.contains("client_secret"), "{m}");
    }

    #[test]
    fn update_keeps_type_and_changes_secrets() {
        let spec = create(oauth()).unwrap();
        let cur = Credential {
            tag: CredentialTag::Tag,
            id: "vcrd_1".into(),
            vault_id: "vlt_1".into(),
            display_name: None,
            auth: spec.auth.clone(),
            metadata: Metadata::new(),
            created_at: String::new(),
            updated_at: String::new(),
            archived_at: None,
        };
        let up = |v| serde_json::from_value::<CredentialUpdate>(v).unwrap();
        let out = up(json!({"auth": {"type": "mcp_oauth", "access_token": "at-2",
            "refresh": {"scope": "", "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": "cs-2"}}}}))
        .apply(&cur, &spec.secrets, NOW)
        .unwrap();
        assert_eq!(out.secrets.token, "at-2");
        assert_eq!(out.secrets.client_secret.as_deref(), Some("cs-2"));
        let r = out.auth.refresh().unwrap();
        assert_eq!(r.scope, None);
        assert_eq!(r.token_endpoint_auth, TokenEndpointAuth::ClientSecretPost);
        assert!(
            up(json!({"auth": {"type": "static_bearer", "token": "x"}}))
                .apply(&cur, &spec.secrets, NOW)
                .is_err()
        );
        assert!(
            up(json!({"auth": {"type": "mcp_oauth", "mcp_server_url": "https://y"}}))
                .apply(&cur, &spec.secrets, NOW)
                .is_err()
        );
    }

    #[test]
    fn urls_compare_without_trailing_slashes_or_case() {
        assert_eq!(
            normalize_url("HTTPS://Mcp.Example.com/mcp/"),
            "https://mcp.example.com/mcp"
        );
        assert_eq!(normalize_url("http://h:8/"), "http://h:8");
        assert_eq!(normalize_url("http://h/a/?q=1"), "http://h/a?q=1");
    }
}
