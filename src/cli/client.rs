//! A small client of a running server's HTTP API for the client commands: the same requests
//! an SDK would send, with errors that say what to do.

use std::time::Duration;

use serde_json::Value;

use super::ServerArgs;

/// How long an ordinary request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer: the server is down, restarting, or elsewhere.
    #[error(
        "cannot reach the Mast server at {url} ({cause}); is `mast serve` running there? (--url or MAST_URL)"
    )]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// Why the request got no answer.
        cause: String,
    },
    /// The server answered with an error.
    #[error("{}", describe_status(*status, message))]
    Status {
        /// The HTTP status.
        status: u16,
        /// The error message of the API's error body.
        message: String,
    },
}

impl CallError {
    /// Whether trying again later may succeed (the server is away or overloaded), as opposed
    /// to a request it refuses.
    pub fn is_transient(&self) -> bool {
        match self {
            CallError::Unreachable { .. } => true,
            CallError::Status { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
        }
    }
}

fn describe_status(status: u16, message: &str) -> String {
    match status {
        401 => format!(
            "the server refused the credentials ({message}): pass --api-key or set MAST_API_KEY (`mast keys create` makes a key)"
        ),
        _ => format!("the server answered {status}: {message}"),
    }
}

/// A client of one server.
pub struct Api {
    base: String,
    key: Option<String>,
    http: reqwest::Client,
}

impl Api {
    /// A client for `--url` with `--api-key` (or `MAST_API_KEY`, then `ANTHROPIC_API_KEY`,
    /// as an SDK pointed at Mast would use).
    pub fn new(args: &ServerArgs) -> anyhow::Result<Self> {
        let base = args.url.trim().trim_end_matches('/').to_string();
        anyhow::ensure!(
            base.starts_with("http://") || base.starts_with("https://"),
            "--url {base:?} must be an http:// or https:// URL"
        );
        let key = args
            .api_key
            .clone()
            .or_else(|| std::env::var("ANTHROPIC_API_KEY").ok())
            .filter(|k| !k.trim().is_empty());
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("mast-cli/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Api { base, key, http })
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("anthropic-version", "2023-06-01");
        if let Some(k) = &self.key {
            req = req.header("x-api-key", k.trim());
        }
        req
    }

    fn unreachable(&self, e: &reqwest::Error) -> CallError {
        // reqwest's own text is "error sending request for url (...)"; the cause says why.
        CallError::Unreachable {
            url: self.base.clone(),
            cause: crate::error_chain::root_cause(e),
        }
    }

    /// Sends a request and returns the response when it is a success.
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, CallError> {
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| text.chars().take(300).collect());
        Err(CallError::Status { status, message })
    }

    async fn json(&self, req: reqwest::RequestBuilder) -> Result<Value, CallError> {
        let resp = self.send(req.timeout(REQUEST_TIMEOUT)).await?;
        resp.json().await.map_err(|e| self.unreachable(&e))
    }

    /// `GET path` → its JSON.
    pub async fn get(&self, path: &str) -> Result<Value, CallError> {
        self.json(self.request(reqwest::Method::GET, path)).await
    }

    /// `POST path` with a JSON body → its JSON.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, CallError> {
        self.json(self.request(reqwest::Method::POST, path).json(body))
            .await
    }

    /// `DELETE path` → its JSON.
    pub async fn delete(&self, path: &str) -> Result<Value, CallError> {
        self.json(self.request(reqwest::Method::DELETE, path)).await
    }

    /// Every item of a paginated list at `path` (which has no query yet), following pages of
    /// `limit` items (each list has its own maximum).
    pub async fn list_all(&self, path: &str, limit: u32) -> Result<Vec<Value>, CallError> {
        self.list(path, &[], limit, None).await
    }

    /// One page of the list at `path` with `query` (pairs, encoded here; `types[]` and the
    /// like as the SDK sends them), after the cursor `page`: its items and the next cursor.
    pub async fn page(
        &self,
        path: &str,
        query: &[(&str, &str)],
        page: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), CallError> {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.extend_pairs(query);
        if let Some(p) = page {
            q.append_pair("page", p);
        }
        let body = self.get(&format!("{path}?{}", q.finish())).await?;
        let items = body["data"].as_array().cloned().unwrap_or_default();
        let next = body["next_page"]
            .as_str()
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        Ok((items, next))
    }

    /// The items of the list at `path` with `query`, following pages of `page_size` items to
    /// the end, or until `max` items are in hand.
    pub async fn list(
        &self,
        path: &str,
        query: &[(&str, &str)],
        page_size: u32,
        max: Option<usize>,
    ) -> Result<Vec<Value>, CallError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            // The last page asks for no more than is still wanted.
            let size = match max {
                Some(m) => page_size.min(u32::try_from(m - out.len()).unwrap_or(u32::MAX)),
                None => page_size,
            };
            let size = size.to_string();
            let mut q = query.to_vec();
            q.push(("limit", &size));
            let (items, next) = self.page(path, &q, cursor.as_deref()).await?;
            out.extend(items);
            if let Some(m) = max
                && out.len() >= m
            {
                out.truncate(m);
                return Ok(out);
            }
            match next {
                Some(p) => cursor = Some(p),
                None => return Ok(out),
            }
        }
    }

    /// Opens a Server-Sent Events stream at `path`, resuming after `last_event_id`.
    pub async fn stream(
        &self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> Result<reqwest::Response, CallError> {
        let mut req = self
            .request(reqwest::Method::GET, path)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        self.send(req).await
    }
}
