//! Vault credentials as the MCP connector gets them (`VaultBearers`), against a real OAuth
//! token endpoint and a stand-in MCP server this test starts on loopback: lookup order,
//! near-expiry and 401-driven refresh with each client authentication method, a refused
//! refresh, one refresh at a time, and secrets sealed at rest. Both stores.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use base64::Engine as _;
use mast::domain::credential::CredentialCreate;
use mast::domain::time;
use mast::domain::vault::{Vault, VaultTag};
use mast::engine::credentials::{BearerSource, CredentialError};
use mast::engine::vaults::{VaultBearers, Vaults};
use mast::secrets::Cipher;
use mast::store::Store;
use mast::tools::netguard::NetGuard;
use serde_json::{Value, json};

use crate::backend_tests;
use crate::store::{WS, create, open, session_rec};
use crate::support::Backend;

backend_tests!(
    static_bearers_follow_vault_order_and_stop_when_archived_or_deleted,
    oauth_tokens_refresh_with_every_client_auth_method,
    a_refused_refresh_is_an_authentication_error,
    concurrent_refreshes_of_one_credential_refresh_once,
    secrets_are_sealed_at_rest,
);

/// How the stand-in authorization server expects the client to authenticate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClientAuth {
    None,
    Basic,
    Post,
}

/// The stand-in authorization server's state.
pub struct AuthState {
    pub mode: ClientAuth,
    /// The refresh token it accepts now (rotated on every refresh).
    pub refresh_token: String,
    /// The access token the stand-in MCP server accepts now.
    pub access_token: String,
    pub refreshes: u32,
    /// Refuse every refresh (`invalid_grant`).
    pub refuse: bool,
}

/// A token endpoint (`/token`) and an MCP endpoint (`/mcp`) on 127.0.0.1:0.
pub struct AuthServer {
    pub url: String,
    pub state: Arc<Mutex<AuthState>>,
}

impl AuthServer {
    pub async fn start(mode: ClientAuth) -> Self {
        let state = Arc::new(Mutex::new(AuthState {
            mode,
            refresh_token: "rt-0-S3CRET".into(),
            access_token: "at-0-S3CRET".into(),
            refreshes: 0,
            refuse: false,
        }));
        let app = axum::Router::new()
            .route("/token", post(token))
            .route("/mcp", post(mcp))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        AuthServer { url, state }
    }

    pub fn refreshes(&self) -> u32 {
        self.state.lock().unwrap().refreshes
    }
}

fn oauth_error(status: StatusCode, error: &str) -> axum::response::Response {
    (status, axum::Json(json!({"error": error}))).into_response()
}

async fn token(
    State(state): State<Arc<Mutex<AuthState>>>,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    let form: std::collections::HashMap<String, String> = form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut s = state.lock().unwrap();
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("client-1:cs-S3CRET")
    );
    let client_ok = match s.mode {
        ClientAuth::None => {
            form.get("client_id").map(String::as_str) == Some("client-1")
                && !form.contains_key("client_secret")
                && authorization.is_none()
        }
        ClientAuth::Post => {
            form.get("client_id").map(String::as_str) == Some("client-1")
                && form.get("client_secret").map(String::as_str) == Some("cs-S3CRET")
                && authorization.is_none()
        }
        ClientAuth::Basic => {
            authorization.as_deref() == Some(basic.as_str()) && !form.contains_key("client_secret")
        }
    };
    if !client_ok {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    if form.get("grant_type").map(String::as_str) != Some("refresh_token")
        || form.get("refresh_token") != Some(&s.refresh_token)
        || s.refuse
    {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    s.refreshes += 1;
    let n = s.refreshes;
    s.refresh_token = format!("rt-{n}-S3CRET");
    s.access_token = format!("at-{n}-S3CRET");
    axum::Json(
        json!({"access_token": s.access_token, "refresh_token": s.refresh_token,
        "token_type": "Bearer", "expires_in": 3600}),
    )
    .into_response()
}

/// Answers `initialize` for the current access token; otherwise a 401 that echoes the token
/// it got (so a report that quotes it unscrubbed would leak it).
async fn mcp(
    State(state): State<Arc<Mutex<AuthState>>>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> axum::response::Response {
    let got = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let want = format!("Bearer {}", state.lock().unwrap().access_token);
    if got != want {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_token", "got": got})),
        )
            .into_response();
    }
    axum::Json(json!({"jsonrpc": "2.0", "id": body["id"], "result": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "stand-in", "version": "1"}}}))
    .into_response()
}

fn vault(id: &str) -> Vault {
    let now = time::format(crate::support::now());
    Vault {
        tag: VaultTag::Tag,
        id: id.into(),
        display_name: id.into(),
        metadata: Default::default(),
        created_at: now.clone(),
        updated_at: now,
        archived_at: None,
    }
}

struct Fixture {
    store: Arc<dyn Store>,
    vaults: Arc<Vaults>,
    bearers: VaultBearers,
    _dir: tempfile::TempDir,
}

async fn fixture(b: Backend, vault_ids: &[&str]) -> Fixture {
    let (store, dir) = open(b).await;
    for v in vault_ids {
        store
            .insert_vault(WS, &vault(v), crate::support::now())
            .await
            .unwrap();
    }
    let mut rec = session_rec("sesn_v", crate::support::now());
    rec.body = json!({"title": null, "metadata": {}, "vault_ids": vault_ids})
        .to_string()
        .into();
    create(store.as_ref(), &rec).await;
    let vaults = Arc::new(Vaults::new(
        store.clone(),
        Cipher::random(),
        NetGuard {
            allow_private: true,
            ..NetGuard::default()
        },
    ));
    Fixture {
        store,
        bearers: VaultBearers(vaults.clone()),
        vaults,
        _dir: dir,
    }
}

impl Fixture {
    async fn credential(&self, vault_id: &str, auth: Value) -> String {
        let req: CredentialCreate = serde_json::from_value(json!({"auth": auth})).unwrap();
        self.vaults
            .create_credential(WS, vault_id, req)
            .await
            .unwrap()
            .id
    }

    async fn bearer(&self, url: &str, refresh: bool) -> Result<Option<String>, CredentialError> {
        self.bearers.bearer("sesn_v", url, refresh).await
    }
}

fn oauth(server: &AuthServer, mode: ClientAuth, expires_in_secs: i64) -> Value {
    let endpoint_auth = match mode {
        ClientAuth::None => json!({"type": "none"}),
        ClientAuth::Basic => json!({"type": "client_secret_basic", "client_secret": "cs-S3CRET"}),
        ClientAuth::Post => json!({"type": "client_secret_post", "client_secret": "cs-S3CRET"}),
    };
    json!({"type": "mcp_oauth", "mcp_server_url": format!("{}/mcp", server.url),
        "access_token": "at-0-S3CRET",
        "expires_at": time::format(crate::support::now() + expires_in_secs * 1_000_000),
        "refresh": {"client_id": "client-1", "refresh_token": "rt-0-S3CRET",
            "token_endpoint": format!("{}/token", server.url), "token_endpoint_auth": endpoint_auth}})
}

async fn static_bearers_follow_vault_order_and_stop_when_archived_or_deleted(b: Backend) {
    let f = fixture(b, &["vlt_b", "vlt_a"]).await;
    let url = "https://mcp.example.com/mcp";
    f.credential(
        "vlt_a",
        json!({"type": "static_bearer", "mcp_server_url": url, "token": "tok-a"}),
    )
    .await;
    let in_b = f
        .credential(
            "vlt_b",
            json!({"type": "static_bearer", "mcp_server_url": format!("{url}/"), "token": "tok-b"}),
        )
        .await;
    // The session lists vlt_b first; URLs match without their trailing slash or case.
    assert_eq!(
        f.bearer("HTTPS://mcp.example.com/mcp", false)
            .await
            .unwrap()
            .as_deref(),
        Some("tok-b")
    );
    assert_eq!(
        f.bearer("https://other.example.com/mcp", false)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        f.bearers.bearer("sesn_none", url, false).await.unwrap(),
        None
    );
    // Archiving takes effect on the next call.
    f.vaults
        .archive_credential(WS, "vlt_b", &in_b)
        .await
        .unwrap();
    assert_eq!(
        f.bearer(url, false).await.unwrap().as_deref(),
        Some("tok-a")
    );
    // So does deleting a vault, and archiving one.
    let mut a = f.store.get_vault(WS, "vlt_a").await.unwrap().unwrap();
    a.archived_at = Some(time::format(crate::support::now()));
    f.store
        .update_vault(WS, &a, crate::support::now(), true)
        .await
        .unwrap();
    assert_eq!(f.bearer(url, false).await.unwrap(), None);
    assert!(f.store.delete_vault(WS, "vlt_a").await.unwrap());
    assert_eq!(f.bearer(url, false).await.unwrap(), None);
}

async fn oauth_tokens_refresh_with_every_client_auth_method(b: Backend) {
    for mode in [ClientAuth::None, ClientAuth::Basic, ClientAuth::Post] {
        let server = AuthServer::start(mode).await;
        let f = fixture(b, &["vlt_1"]).await;
        let url = format!("{}/mcp", server.url);
        let id = f.credential("vlt_1", oauth(&server, mode, 30)).await;
        // 30 s from expiry: refreshed before use, and the new tokens are stored.
        let t = f.bearer(&url, false).await.unwrap();
        assert_eq!(t.as_deref(), Some("at-1-S3CRET"), "{mode:?}");
        assert_eq!(server.refreshes(), 1);
        let stored = f
            .store
            .get_credential(WS, "vlt_1", &id)
            .await
            .unwrap()
            .unwrap();
        let expires = stored.credential.auth.expires_at().unwrap();
        assert!(
            expires > crate::support::now() + 3000 * 1_000_000,
            "{mode:?}: new expiry stored"
        );
        // Fresh now: no refresh.
        assert_eq!(
            f.bearer(&url, false).await.unwrap().as_deref(),
            Some("at-1-S3CRET")
        );
        assert_eq!(server.refreshes(), 1);
        // The server refused it (401): refreshed with the rotated refresh token.
        assert_eq!(
            f.bearer(&url, true).await.unwrap().as_deref(),
            Some("at-2-S3CRET")
        );
        assert_eq!(server.refreshes(), 2, "{mode:?}");
    }
}

async fn a_refused_refresh_is_an_authentication_error(b: Backend) {
    let server = AuthServer::start(ClientAuth::Post).await;
    let f = fixture(b, &["vlt_1"]).await;
    let url = format!("{}/mcp", server.url);
    f.credential("vlt_1", oauth(&server, ClientAuth::Post, 3600))
        .await;
    server.state.lock().unwrap().refuse = true;
    let e = f.bearer(&url, true).await.unwrap_err();
    assert!(matches!(e, CredentialError::Authentication(_)), "{e:?}");
    assert!(!e.to_string().contains("S3CRET"), "{e}");
    // A static token refused by its server cannot refresh: the caller is given it again and
    // reports the refusal itself; an OAuth token without refresh settings is an error.
    let f2 = fixture(b, &["vlt_2"]).await;
    f2.credential(
        "vlt_2",
        json!({"type": "mcp_oauth", "mcp_server_url": url, "access_token": "x-S3CRET"}),
    )
    .await;
    assert!(matches!(
        f2.bearer(&url, true).await.unwrap_err(),
        CredentialError::Authentication(_)
    ));
    assert_eq!(
        f2.bearer(&url, false).await.unwrap().as_deref(),
        Some("x-S3CRET")
    );
    // A token endpoint that cannot be reached is worth retrying, not an auth failure.
    let f3 = fixture(b, &["vlt_3"]).await;
    let mut auth = oauth(&server, ClientAuth::Post, 3600);
    auth["refresh"]["token_endpoint"] = json!("http://127.0.0.1:9/token");
    f3.credential("vlt_3", auth).await;
    assert!(matches!(
        f3.bearer(&url, true).await.unwrap_err(),
        CredentialError::Unavailable(_)
    ));
}

async fn concurrent_refreshes_of_one_credential_refresh_once(b: Backend) {
    let server = AuthServer::start(ClientAuth::Basic).await;
    let f = Arc::new(fixture(b, &["vlt_1"]).await);
    let url = format!("{}/mcp", server.url);
    f.credential("vlt_1", oauth(&server, ClientAuth::Basic, 5))
        .await;
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (f, url) = (f.clone(), url.clone());
            tokio::spawn(async move { f.bearer(&url, false).await })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap().as_deref(), Some("at-1-S3CRET"));
    }
    // Each refresh rotates the refresh token, so a second one would have failed; one ran.
    assert_eq!(server.refreshes(), 1);
}

async fn secrets_are_sealed_at_rest(b: Backend) {
    let f = fixture(b, &["vlt_1"]).await;
    let server = AuthServer::start(ClientAuth::Post).await;
    let id = f
        .credential("vlt_1", oauth(&server, ClientAuth::Post, 3600))
        .await;
    let rec = f
        .store
        .get_credential(WS, "vlt_1", &id)
        .await
        .unwrap()
        .unwrap();
    let stored = format!("{:?}{}", rec.sealed, String::from_utf8_lossy(&rec.sealed));
    let public = serde_json::to_string(&rec.credential).unwrap();
    for secret in ["at-0-S3CRET", "rt-0-S3CRET", "cs-S3CRET"] {
        assert!(
            !stored.contains(secret) && !public.contains(secret),
            "{secret}"
        );
    }
    if b == Backend::Sqlite {
        // Nothing in the database files holds a secret in the clear.
        for entry in std::fs::read_dir(f._dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(11).any(|w| w == b"at-0-S3CRET"),
                    "{} holds a token",
                    path.display()
                );
            }
        }
    }
    // The round trip: this key opens them, another does not.
    assert_eq!(
        f.bearer(&format!("{}/mcp", server.url), false)
            .await
            .unwrap()
            .as_deref(),
        Some("at-0-S3CRET")
    );
    let other = VaultBearers(Arc::new(Vaults::new(
        f.store.clone(),
        Cipher::random(),
        NetGuard {
            allow_private: true,
            ..NetGuard::default()
        },
    )));
    assert!(matches!(
        other
            .bearer("sesn_v", &format!("{}/mcp", server.url), false)
            .await
            .unwrap_err(),
        CredentialError::Unavailable(_)
    ));
}
