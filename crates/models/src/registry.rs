//! Which provider serves a model id. Configured providers (from `MAST_PROVIDERS` or the config
//! file) come first — exact model lists, then the longest matching prefix — then the built-in
//! defaults: `mast-scripted` → the scripted model, `claude-…` → the Anthropic Messages API
//! (when `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN` or `ANTHROPIC_BASE_URL` is set).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::ModelClient;
use super::anthropic::{AnthropicClient, AnthropicConfig};
use super::openai::{OpenAiClient, OpenAiConfig};
use super::scripted::{self, Scripted};

/// Claude model ids the official SDK knows; listed by `GET /v1/models` when Anthropic is set up.
pub const CLAUDE_MODELS: &[&str] = &[
    "claude-fable-5-2",
    "claude-haiku-5-5",
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-fable-5-1",
    "claude-sonnet-5",
    "claude-fable-5",
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-5",
    "claude-opus-4-5-20251101",
    "claude-sonnet-4-5",
    "claude-sonnet-4-5-20250929",
];

/// Wire protocol of a configured provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Anthropic,
    Openai,
}

/// One configured provider, as written in `MAST_PROVIDERS` (JSON) or `[[providers]]` (TOML).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: ProviderKind,
    /// Endpoint base; OpenAI-compatible ones include the version path (`…/v1`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Name of the environment variable holding the provider's API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Model ids this provider serves exactly.
    #[serde(default)]
    pub models: Vec<String>,
    /// Every model id starting with this prefix goes to this provider.
    #[serde(default)]
    pub model_prefix: Option<String>,
    /// Send the id without the prefix (`ollama/llama3.2` → `llama3.2`).
    #[serde(default)]
    pub strip_prefix: bool,
}

/// The providers section of a config file.
#[derive(Debug, Default, Deserialize)]
pub struct ProvidersFile {
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
}

struct Provider {
    config: ProviderConfig,
    client: Arc<dyn ModelClient>,
    api_key: Option<String>,
}

/// Where a model id goes.
#[derive(Clone)]
pub struct Route {
    pub client: Arc<dyn ModelClient>,
    /// The id sent to the provider.
    pub upstream_model: String,
    /// The provider's name (`anthropic`, `scripted`, or a configured name).
    pub provider: String,
}

/// A model in the catalog (`GET /v1/models`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub id: String,
    pub display_name: String,
    pub provider: String,
}

/// The configured providers and the routing between them.
pub struct Models {
    providers: Vec<Provider>,
    anthropic: Option<Arc<AnthropicClient>>,
    scripted: Arc<Scripted>,
    http: reqwest::Client,
    remote: Mutex<Option<(Instant, Vec<CatalogEntry>)>>,
    /// What the built-in Anthropic endpoint offers (`GET /v1/models`), or why it could not be
    /// read; refreshed by [`Models::refresh`].
    claude: Mutex<Option<(Instant, ModelList)>>,
    /// Where the providers were configured, named when no provider serves a model.
    sources: ProviderSources,
}

/// Where provider configuration was read from. A refused model id names both places
/// providers can be configured, and which of them this server read, so the operator knows
/// where to add one; the binary reads the configuration and this crate only says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderSources {
    /// Whether `MAST_PROVIDERS` was set.
    pub env: bool,
    /// The config file whose `[[providers]]` tables were read, if one was.
    pub file: Option<PathBuf>,
}

impl ProviderSources {
    /// Where providers were read from, as the tail of a message.
    fn describe(&self) -> String {
        let env = if self.env {
            "MAST_PROVIDERS"
        } else {
            "MAST_PROVIDERS (unset here)"
        };
        match &self.file {
            // The file's name only: this message reaches API clients, who need not learn the
            // server's directory layout; the operator knows where their config file is.
            Some(file) => format!(
                "providers are configured in {env} and in the `[[providers]]` tables of the server's config file `{}`",
                file.file_name().map_or_else(
                    || file.display().to_string(),
                    |n| n.to_string_lossy().into_owned()
                )
            ),
            None => format!(
                "providers are configured in {env} and in the `[[providers]]` tables of a config file \
                 (./mast.toml, or the file of --config / MAST_CONFIG; none was read)"
            ),
        }
    }
}

/// What a configured provider serves, for messages: its listed ids and its prefix.
fn serves(p: &ProviderConfig) -> String {
    const SHOWN: usize = 5;
    let mut ids: Vec<String> = p
        .models
        .iter()
        .take(SHOWN)
        .map(|m| format!("`{m}`"))
        .collect();
    if p.models.len() > SHOWN {
        ids.push("…".into());
    }
    if let Some(prefix) = p.model_prefix.as_deref().filter(|x| !x.is_empty()) {
        ids.push(format!("`{prefix}…`"));
    }
    ids.join(", ")
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// A provider's model ids, or why they could not be read.
type ModelList = Result<Vec<String>, String>;

/// How long a reading of the Anthropic model list is kept, and a failed reading.
const CLAUDE_LIST_TTL: Duration = Duration::from_secs(600);
const CLAUDE_LIST_RETRY: Duration = Duration::from_secs(30);

fn display_name(id: &str) -> String {
    if id == scripted::MODEL_ID {
        return "Mast scripted model".into();
    }
    let Some(rest) = id.strip_prefix("claude-") else {
        return id.to_string();
    };
    let parts: Vec<&str> = rest.split('-').filter(|p| p.len() < 8).collect();
    let (family, version) = parts
        .split_first()
        .map(|(f, v)| (*f, v.join(".")))
        .unwrap_or(("", String::new()));
    let mut f = family.chars();
    let family = f
        .next()
        .map(|c| c.to_uppercase().chain(f).collect::<String>())
        .unwrap_or_default();
    format!("Claude {family} {version}").trim().to_string()
}

impl Models {
    /// Builds the providers; fails on an invalid configuration.
    pub fn new(anthropic: AnthropicConfig, configured: &[ProviderConfig]) -> anyhow::Result<Self> {
        let mut names = BTreeSet::new();
        let mut providers = Vec::new();
        for p in configured {
            anyhow::ensure!(
                !p.name.trim().is_empty(),
                "a configured provider has an empty `name`"
            );
            anyhow::ensure!(
                names.insert(p.name.clone()),
                "provider `{}` is configured twice",
                p.name
            );
            anyhow::ensure!(
                !p.models.is_empty() || p.model_prefix.as_deref().is_some_and(|x| !x.is_empty()),
                "provider `{}` needs `models` or `model_prefix`",
                p.name
            );
            let api_key = match &p.api_key_env {
                Some(var) => match std::env::var(var) {
                    Ok(k) if !k.is_empty() => Some(k),
                    _ => {
                        tracing::warn!(provider = %p.name, variable = %var, "the provider's API key variable is not set");
                        None
                    }
                },
                None => None,
            };
            let client: Arc<dyn ModelClient> = match p.kind {
                ProviderKind::Openai => {
                    let base = p.base_url.clone().ok_or_else(|| {
                        anyhow::anyhow!("provider `{}` (openai) needs `base_url`", p.name)
                    })?;
                    anyhow::ensure!(
                        base.starts_with("http://") || base.starts_with("https://"),
                        "provider `{}`: `base_url` must be an http(s) URL",
                        p.name
                    );
                    Arc::new(OpenAiClient::new(OpenAiConfig {
                        base_url: base,
                        api_key: api_key.clone(),
                        read_timeout: anthropic.read_timeout,
                    }))
                }
                ProviderKind::Anthropic => Arc::new(AnthropicClient::new(AnthropicConfig {
                    base_url: p
                        .base_url
                        .clone()
                        .unwrap_or_else(|| "https://api.anthropic.com".into()),
                    api_key: api_key.clone(),
                    auth_token: None,
                    read_timeout: anthropic.read_timeout,
                })),
            };
            providers.push(Provider {
                config: p.clone(),
                client,
                api_key,
            });
        }
        let builtin = anthropic.api_key.is_some()
            || anthropic.auth_token.is_some()
            || anthropic.base_url_is_custom();
        Ok(Models {
            providers,
            anthropic: builtin.then(|| Arc::new(AnthropicClient::new(anthropic))),
            scripted: Arc::new(Scripted),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .expect("http client"),
            remote: Mutex::new(None),
            claude: Mutex::new(None),
            sources: ProviderSources::default(),
        })
    }

    /// Says where the configured providers were read from (see [`ProviderSources`]).
    pub fn configured_in(mut self, sources: ProviderSources) -> Self {
        self.sources = sources;
        self
    }

    /// Refuses provider endpoints that are this server itself (listening on `listen`): a shell
    /// that exports `ANTHROPIC_BASE_URL` for the SDK would otherwise make Mast call itself.
    /// `is_local` says whether an address is one of this host's own (the sandbox's network
    /// guard knows; providers do not depend on it).
    pub fn check_not_self(
        &self,
        listen: SocketAddr,
        is_local: fn(std::net::IpAddr) -> bool,
    ) -> anyhow::Result<()> {
        if let Some(a) = &self.anthropic
            && points_at(a.base_url(), listen, is_local)
        {
            anyhow::bail!(
                "the Anthropic base URL {} points at this server itself (it listens on {listen}), so every Claude \
                 request would loop back into Mast. ANTHROPIC_BASE_URL is probably set for the SDK in this shell: \
                 unset it for the server, or set MAST_ANTHROPIC_BASE_URL (which the server reads first) to the real \
                 endpoint",
                a.base_url()
            );
        }
        for p in &self.providers {
            if let Some(url) = &p.config.base_url
                && points_at(url, listen, is_local)
            {
                anyhow::bail!(
                    "provider `{}`'s base_url {url} points at this server itself (it listens on {listen}); \
                     point it at the provider's own endpoint",
                    p.config.name
                );
            }
        }
        Ok(())
    }

    /// One line per model source, for the start-up banner: what is live, and how to turn
    /// Claude on when it is not.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!("{} (built in, no network)", scripted::MODEL_ID)];
        match &self.anthropic {
            Some(a) => out.push(format!(
                "claude-… via the Anthropic Messages API at {}",
                a.base_url()
            )),
            None => out.push(
                "claude-… off: set ANTHROPIC_API_KEY (or MAST_ANTHROPIC_API_KEY) to turn Claude on"
                    .into(),
            ),
        }
        for p in &self.providers {
            let serves = match (&p.config.model_prefix, p.config.models.is_empty()) {
                (Some(prefix), _) if !prefix.is_empty() => format!("{prefix}…"),
                _ => p.config.models.join(", "),
            };
            out.push(format!(
                "{serves} via `{}` at {}",
                p.config.name,
                p.config
                    .base_url
                    .as_deref()
                    .unwrap_or("https://api.anthropic.com")
            ));
        }
        out
    }

    /// The provider for a model id, or why none serves it: what to use instead, where
    /// providers are configured and, when a configured provider would serve the id with its
    /// prefix, that id.
    pub fn route(&self, model_id: &str) -> Result<Route, String> {
        if let Some(route) = self.lookup(model_id) {
            return Ok(route);
        }
        let sources = self.sources.describe();
        if model_id.starts_with("claude-") && self.anthropic.is_none() {
            return Err(format!(
                "no model provider serves `{model_id}`: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL) to use Claude models, \
                 or configure a provider that serves it; {sources}"
            ));
        }
        let hint = match self.suggestions(model_id).as_slice() {
            [] => String::new(),
            ids => format!(
                " (did you mean {}?)",
                one_of(&ids.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>())
            ),
        };
        let configured = self
            .providers
            .iter()
            .map(|p| format!("{} via `{}`", serves(&p.config), p.config.name))
            .collect::<Vec<_>>();
        let others = if configured.is_empty() {
            "or configure a provider that serves it".to_string()
        } else {
            format!(
                "or a model of a configured provider ({})",
                configured.join("; ")
            )
        };
        Err(format!(
            "no model provider serves `{model_id}`{hint}: use a Claude model id, `{}`, {others}; {sources}",
            scripted::MODEL_ID
        ))
    }

    /// The provider that serves a model id, if one does.
    fn lookup(&self, model_id: &str) -> Option<Route> {
        if let Some(p) = self
            .providers
            .iter()
            .find(|p| p.config.models.iter().any(|m| m == model_id))
        {
            return Some(Route {
                client: p.client.clone(),
                upstream_model: model_id.to_string(),
                provider: p.config.name.clone(),
            });
        }
        let by_prefix = self
            .providers
            .iter()
            .filter_map(|p| {
                p.config
                    .model_prefix
                    .as_deref()
                    .filter(|x| !x.is_empty() && model_id.starts_with(x))
                    .map(|x| (x.len(), p))
            })
            .max_by_key(|(len, _)| *len);
        if let Some((len, p)) = by_prefix {
            let upstream = if p.config.strip_prefix {
                &model_id[len..]
            } else {
                model_id
            };
            if !upstream.is_empty() {
                return Some(Route {
                    client: p.client.clone(),
                    upstream_model: upstream.to_string(),
                    provider: p.config.name.clone(),
                });
            }
        }
        if model_id == scripted::MODEL_ID {
            return Some(Route {
                client: self.scripted.clone(),
                upstream_model: model_id.into(),
                provider: "scripted".into(),
            });
        }
        match &self.anthropic {
            Some(a) if model_id.starts_with("claude-") => Some(Route {
                client: a.clone(),
                upstream_model: model_id.into(),
                provider: "anthropic".into(),
            }),
            _ => None,
        }
    }

    /// Ids a configured provider serves that name this model the way its provider does: the
    /// id under a prefix the provider strips or that ends in `/` (`llama3.2` →
    /// `ollama/llama3.2`), or a listed id whose last path segment it is. A prefix that is
    /// kept and is not a path (`gpt-`) is left out: `gpt-` + `4o` is a guess, not the same
    /// model under another name.
    fn suggestions(&self, model_id: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if model_id.is_empty() {
            return out;
        }
        for p in &self.providers {
            if let Some(prefix) = p.config.model_prefix.as_deref()
                && !prefix.is_empty()
                && (p.config.strip_prefix || prefix.ends_with('/'))
            {
                let id = format!("{prefix}{model_id}");
                // A longer prefix of another provider may take the id: only one that
                // reaches this provider is what the provider serves.
                if self
                    .lookup(&id)
                    .is_some_and(|r| r.provider == p.config.name)
                {
                    out.push(id);
                }
            }
            out.extend(
                p.config
                    .models
                    .iter()
                    .filter(|m| m.rsplit_once('/').is_some_and(|(_, last)| last == model_id))
                    .cloned(),
            );
        }
        let mut seen = BTreeSet::new();
        out.retain(|id| seen.insert(id.clone()));
        out
    }

    /// Fails with a clear message when no provider serves the id. A Claude id for the built-in
    /// Anthropic endpoint must be one the endpoint lists (as last read by [`Models::refresh`]);
    /// while the list cannot be read, one of the Claude models Mast knows.
    pub fn check_routable(&self, model_id: &str) -> Result<(), String> {
        let route = self.route(model_id)?;
        let Some(a) = self
            .anthropic
            .as_ref()
            .filter(|_| route.provider == "anthropic")
        else {
            return Ok(());
        };
        let listed = self.claude.lock().expect("claude list lock").clone();
        match listed.map(|(_, l)| l) {
            Some(Ok(ids)) if !ids.is_empty() => {
                if ids.iter().any(|m| m == model_id) {
                    return Ok(());
                }
                let mut offered = ids.clone();
                offered.truncate(12);
                Err(format!(
                    "`{model_id}` is not a model the Anthropic API at {} offers; it offers {}{} (GET /v1/models lists every model this server routes)",
                    a.base_url(),
                    offered.join(", "),
                    if ids.len() > offered.len() {
                        ", …"
                    } else {
                        ""
                    }
                ))
            }
            _ if CLAUDE_MODELS.contains(&model_id) => Ok(()),
            Some(Err(why)) => Err(format!(
                "`{model_id}` is not a Claude model Mast knows, and the Anthropic API's model list at {} could not be read to check it ({why})",
                a.base_url()
            )),
            _ => Err(format!(
                "`{model_id}` is not a Claude model Mast knows (GET /v1/models lists every model this server routes)"
            )),
        }
    }

    /// Re-reads the Anthropic endpoint's model list when the last reading is stale (call
    /// before [`Models::check_routable`] where waiting is fine, such as saving an agent).
    /// Returns the reading.
    pub async fn refresh(&self) -> Option<ModelList> {
        let a = self.anthropic.as_ref()?;
        if let Some((at, listed)) = &*self.claude.lock().expect("claude list lock") {
            let ttl = if listed.is_ok() {
                CLAUDE_LIST_TTL
            } else {
                CLAUDE_LIST_RETRY
            };
            if at.elapsed() < ttl {
                return Some(listed.clone());
            }
        }
        let listed = a.list_models().await;
        *self.claude.lock().expect("claude list lock") = Some((Instant::now(), listed.clone()));
        Some(listed)
    }

    /// `GET {base}/models` of an OpenAI-compatible provider, with its key.
    fn models_request(&self, p: &Provider, base: &str) -> reqwest::RequestBuilder {
        let req = self
            .http
            .get(format!("{}/models", base.trim_end_matches('/')));
        match &p.api_key {
            Some(k) => req.bearer_auth(k),
            None => req,
        }
    }

    /// Checks at start-up that each configured provider answers, and logs the ones that do
    /// not with the cause, so a typo in a URL or key shows before the first session fails.
    pub async fn probe(&self) {
        if let Some(a) = &self.anthropic {
            match self.refresh().await {
                Some(Ok(ids)) => tracing::info!(
                    endpoint = a.base_url(),
                    models = ids.len(),
                    "the Anthropic API answers"
                ),
                Some(Err(why)) => tracing::warn!(
                    endpoint = a.base_url(),
                    "the Anthropic API's model list could not be read ({why}); Claude sessions may fail, and only the Claude models Mast knows are accepted"
                ),
                None => {}
            }
        }
        for p in self
            .providers
            .iter()
            .filter(|p| p.config.kind == ProviderKind::Openai)
        {
            let Some(base) = p.config.base_url.as_deref() else {
                continue;
            };
            match self.models_request(p, base).send().await {
                Ok(r) if r.status().is_success() => {
                    tracing::info!(provider = %p.config.name, endpoint = base, "the provider answers")
                }
                Ok(r) => {
                    tracing::warn!(provider = %p.config.name, endpoint = base, status = r.status().as_u16(),
                    "the provider answered its model list with an error; its sessions may fail")
                }
                Err(e) => tracing::warn!(provider = %p.config.name, endpoint = base,
                    "the provider is unreachable ({}); its sessions will fail until it answers", super::http::describe(&e)),
            }
        }
    }

    /// Every model the configuration names: built-ins, explicit lists, and (best effort,
    /// cached for a minute) what prefix-routed OpenAI-compatible endpoints report on `/models`.
    pub async fn catalog(&self) -> Vec<CatalogEntry> {
        let mut out = vec![CatalogEntry {
            id: scripted::MODEL_ID.into(),
            display_name: display_name(scripted::MODEL_ID),
            provider: "scripted".into(),
        }];
        if self.anthropic.is_some() {
            // What the endpoint lists when it can be read, else the models Mast knows.
            let claude = match self.refresh().await {
                Some(Ok(ids)) if !ids.is_empty() => ids,
                _ => CLAUDE_MODELS.iter().map(|id| (*id).to_string()).collect(),
            };
            out.extend(claude.iter().map(|id| CatalogEntry {
                id: id.clone(),
                display_name: display_name(id),
                provider: "anthropic".into(),
            }));
        }
        for p in &self.providers {
            out.extend(p.config.models.iter().map(|id| CatalogEntry {
                id: id.clone(),
                display_name: id.clone(),
                provider: p.config.name.clone(),
            }));
        }
        out.extend(self.remote_models().await);
        let mut seen = BTreeSet::new();
        out.retain(|e| {
            seen.insert(e.id.clone()) && self.route(&e.id).is_ok_and(|r| r.provider == e.provider)
        });
        out
    }

    async fn remote_models(&self) -> Vec<CatalogEntry> {
        if let Some((at, cached)) = &*self.remote.lock().expect("catalog lock")
            && at.elapsed() < Duration::from_secs(60)
        {
            return cached.clone();
        }
        let mut found = Vec::new();
        for p in self
            .providers
            .iter()
            .filter(|p| p.config.kind == ProviderKind::Openai)
        {
            let (Some(prefix), Some(base)) = (
                p.config.model_prefix.as_deref(),
                p.config.base_url.as_deref(),
            ) else {
                continue;
            };
            let Ok(resp) = self.models_request(p, base).send().await else {
                continue;
            };
            let Ok(body) = resp.json::<Value>().await else {
                continue;
            };
            for id in body
                .get("data")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("id").and_then(Value::as_str))
            {
                let exposed = if p.config.strip_prefix {
                    format!("{prefix}{id}")
                } else {
                    id.to_string()
                };
                found.push(CatalogEntry {
                    display_name: exposed.clone(),
                    id: exposed,
                    provider: p.config.name.clone(),
                });
            }
        }
        *self.remote.lock().expect("catalog lock") = Some((Instant::now(), found.clone()));
        found
    }
}

/// Reads provider configuration: `MAST_PROVIDERS` (a JSON array) and/or a TOML file with
/// `[[providers]]` tables.
pub fn load_providers(
    env_json: Option<&str>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Vec<ProviderConfig>> {
    let mut out = Vec::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let parsed: ProvidersFile =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        out.extend(parsed.providers);
    }
    if let Some(json) = env_json.filter(|j| !j.trim().is_empty()) {
        let parsed: Vec<ProviderConfig> =
            serde_json::from_str(json).map_err(|e| anyhow::anyhow!("MAST_PROVIDERS: {e}"))?;
        out.extend(parsed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic(key: bool) -> AnthropicConfig {
        AnthropicConfig {
            base_url: "https://api.anthropic.com".into(),
            api_key: key.then(|| "k".into()),
            auth_token: None,
            read_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn routes_by_list_then_longest_prefix_then_builtins() {
        let providers = load_providers(
            Some(r#"[{"name":"ollama","kind":"openai","base_url":"http://127.0.0.1:11434/v1","model_prefix":"ollama/","strip_prefix":true},
                     {"name":"vllm","kind":"openai","base_url":"http://10.0.0.2/v1","models":["claude-local"]},
                     {"name":"long","kind":"openai","base_url":"http://10.0.0.3/v1","model_prefix":"ollama/big-"}]"#),
            None,
        )
        .unwrap();
        let m = Models::new(anthropic(false), &providers).unwrap();
        let r = m.route("ollama/llama3.2").unwrap();
        assert_eq!(
            (r.provider.as_str(), r.upstream_model.as_str()),
            ("ollama", "llama3.2")
        );
        assert_eq!(m.route("ollama/big-one").unwrap().provider, "long");
        assert_eq!(m.route("claude-local").unwrap().provider, "vllm");
        assert_eq!(m.route("mast-scripted").unwrap().provider, "scripted");
        assert!(
            m.route("claude-opus-4-7")
                .err()
                .unwrap()
                .contains("ANTHROPIC_API_KEY")
        );
        assert!(m.route("gpt-4o").is_err());
        let m = Models::new(anthropic(true), &[]).unwrap();
        assert_eq!(m.route("claude-opus-4-7").unwrap().provider, "anthropic");
    }

    #[test]
    fn a_refused_model_suggests_the_id_a_provider_serves_it_under() {
        let ollama = r#"{"name":"ollama","kind":"openai","base_url":"http://h/v1","model_prefix":"ollama/","strip_prefix":true}"#;
        let lab = r#"{"name":"lab","kind":"openai","base_url":"http://h/v1","model_prefix":"lab/","strip_prefix":true}"#;
        let kept_path = r#"{"name":"router","kind":"openai","base_url":"http://h/v1","model_prefix":"openrouter/"}"#;
        let kept_word =
            r#"{"name":"oai","kind":"openai","base_url":"http://h/v1","model_prefix":"gpt-"}"#;
        let listed = r#"{"name":"vllm","kind":"openai","base_url":"http://h/v1","models":["meta/llama-3-8b","qwen"]}"#;
        let longer = r#"{"name":"big","kind":"openai","base_url":"http://h/v1","model_prefix":"ollama/big-"}"#;
        // (providers, the id written, the hint)
        let table: &[(&[&str], &str, Option<&str>)] = &[
            (&[ollama], "llama3.2", Some("`ollama/llama3.2`")),
            (
                &[ollama, lab],
                "qwen3",
                Some("`ollama/qwen3` or `lab/qwen3`"),
            ),
            (&[kept_path], "llama3.2", Some("`openrouter/llama3.2`")),
            (&[kept_word], "4o", None),
            (&[listed], "llama-3-8b", Some("`meta/llama-3-8b`")),
            (&[listed], "llama", None),
            // `ollama/big-one` goes to `big`, which keeps its prefix: not what `ollama` serves.
            (&[ollama, longer], "big-one", None),
            (&[], "llama3.2", None),
        ];
        for (providers, id, hint) in table {
            let json = format!("[{}]", providers.join(","));
            let m = Models::new(
                anthropic(false),
                &load_providers(Some(&json), None).unwrap(),
            )
            .unwrap();
            let e = m.route(id).err().expect(id);
            assert!(
                e.starts_with(&format!("no model provider serves `{id}`")),
                "{e}"
            );
            match hint {
                Some(h) => assert!(e.contains(&format!("(did you mean {h}?)")), "{id}: {e}"),
                None => assert!(!e.contains("did you mean"), "{id}: {e}"),
            }
        }
    }

    #[test]
    fn a_refused_model_says_where_providers_are_configured() {
        let p = load_providers(
            Some(r#"[{"name":"ollama","kind":"openai","base_url":"http://h/v1","model_prefix":"ollama/","strip_prefix":true},
                     {"name":"vllm","kind":"openai","base_url":"http://h/v1","models":["qwen"]}]"#),
            None,
        )
        .unwrap();
        let read = ProviderSources {
            env: true,
            file: Some(PathBuf::from("/etc/mast/mast.toml")),
        };
        let m = Models::new(anthropic(false), &p)
            .unwrap()
            .configured_in(read);
        assert_eq!(
            m.route("llama3.2").err().unwrap(),
            "no model provider serves `llama3.2` (did you mean `ollama/llama3.2`?): use a Claude model id, \
             `mast-scripted`, or a model of a configured provider (`ollama/…` via `ollama`; `qwen` via `vllm`); \
             providers are configured in MAST_PROVIDERS and in the `[[providers]]` tables of the server's config file `mast.toml`"
        );
        let e = m.route("claude-opus-4-7").err().unwrap();
        assert!(
            e.contains("ANTHROPIC_API_KEY")
                && e.ends_with("tables of the server's config file `mast.toml`"),
            "{e}"
        );
        // Nothing read: both places are named, and that neither was used.
        let m = Models::new(anthropic(false), &[]).unwrap();
        let e = m.route("gpt-4o").err().unwrap();
        assert!(
            e.contains("`mast-scripted`, or configure a provider that serves it; providers are configured in MAST_PROVIDERS (unset here)")
                && e.contains("(./mast.toml, or the file of --config / MAST_CONFIG; none was read)"),
            "{e}"
        );
    }

    #[test]
    fn rejects_bad_configuration() {
        assert!(load_providers(Some("{"), None).is_err());
        assert!(load_providers(Some(r#"[{"name":"x","kind":"grpc"}]"#), None).is_err());
        let p = load_providers(
            Some(r#"[{"name":"x","kind":"openai","models":["a"]}]"#),
            None,
        )
        .unwrap();
        assert!(
            Models::new(anthropic(false), &p).is_err(),
            "openai needs base_url"
        );
        let p = load_providers(
            Some(r#"[{"name":"x","kind":"openai","base_url":"http://h/v1"}]"#),
            None,
        )
        .unwrap();
        assert!(
            Models::new(anthropic(false), &p).is_err(),
            "needs models or a prefix"
        );
        let twice = r#"[{"name":"x","kind":"openai","base_url":"http://h/v1","models":["a"]},{"name":"x","kind":"openai","base_url":"http://h/v1","models":["b"]}]"#;
        assert!(
            Models::new(
                anthropic(false),
                &load_providers(Some(twice), None).unwrap()
            )
            .is_err()
        );
    }

    #[test]
    fn toml_file_and_display_names() {
        let dir = std::env::temp_dir().join(format!("mast-providers-{}", std::process::id()));
        std::fs::write(&dir, "[[providers]]\nname = \"ollama\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodels = [\"llama3.2\"]\n").unwrap();
        let p = load_providers(None, Some(&dir)).unwrap();
        std::fs::remove_file(&dir).ok();
        assert_eq!(p[0].models, vec!["llama3.2".to_string()]);
        assert_eq!(display_name("claude-opus-4-7"), "Claude Opus 4.7");
        assert_eq!(
            display_name("claude-haiku-4-5-20251001"),
            "Claude Haiku 4.5"
        );
    }
}

/// Whether `url` reaches the server listening on `listen` (`is_local`: whether an address is
/// one of this host's own).
fn points_at(url: &str, listen: SocketAddr, is_local: fn(std::net::IpAddr) -> bool) -> bool {
    use std::net::ToSocketAddrs as _;
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    let (Some(host), Some(port)) = (u.host_str(), u.port_or_known_default()) else {
        return false;
    };
    if port != listen.port() {
        return false;
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ips: Vec<std::net::IpAddr> = match host.parse() {
        Ok(ip) => vec![ip],
        Err(_) => (host, port)
            .to_socket_addrs()
            .map(|a| a.map(|a| a.ip()).collect())
            .unwrap_or_default(),
    };
    ips.iter().any(|ip| {
        *ip == listen.ip() || (listen.ip().is_unspecified() && (ip.is_loopback() || is_local(*ip)))
    })
}

#[cfg(test)]
mod self_url_tests {
    use super::points_at;

    #[test]
    fn a_url_of_this_server_is_recognised() {
        let local = "127.0.0.1:8080".parse().unwrap();
        let none = |_| false;
        assert!(points_at("http://127.0.0.1:8080", local, none));
        assert!(points_at("http://localhost:8080/", local, none));
        assert!(!points_at("http://127.0.0.1:8081", local, none));
        assert!(!points_at("https://api.anthropic.com", local, none));
        let any = "0.0.0.0:443".parse().unwrap();
        assert!(points_at("https://127.0.0.1", any, none));
        assert!(!points_at("https://127.0.0.1:8443", any, none));
        assert!(points_at("https://10.9.8.7", any, |ip| ip.to_string() == "10.9.8.7"));
    }
}
