//! The model providers' checks: each configured provider is asked for its model list.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

use super::{Finding, Setup};
use crate::models::registry::{Models, ProviderKind};

/// How a provider answered its model list.
async fn probe_models(
    check: String,
    url: String,
    headers: Vec<(&'static str, String)>,
    key_hint: String,
) -> Finding {
    let mut req = reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(10));
    for (k, v) in headers {
        req = req.header(k, v);
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => {
            let n = r
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["data"].as_array().map(Vec::len));
            let models = n.map(|n| format!(", {n} models")).unwrap_or_default();
            Finding::ok(check, format!("{url} answers{models}"))
        }
        Ok(r) if matches!(r.status().as_u16(), 401 | 403) => Finding::fail(
            check,
            format!("{url} refused the credentials ({})", r.status()),
            format!("check {key_hint}"),
        ),
        Ok(r) => Finding::fail(
            check,
            format!("{url} answered {}", r.status()),
            "check the provider's base URL, and its status",
        ),
        Err(e) => {
            let cause = crate::error_chain::root_cause(&e);
            Finding::fail(
                check,
                format!("cannot reach {url}: {cause}"),
                "check the base URL, DNS, proxies and firewalls between this host and the provider",
            )
        }
    }
}

/// Headers that authenticate to the Anthropic API.
fn anthropic_headers(key: Option<&str>, token: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", "2023-06-01".to_string())];
    if let Some(k) = key {
        h.push(("x-api-key", k.to_string()));
    }
    if let Some(t) = token {
        h.push(("authorization", format!("Bearer {t}")));
    }
    h
}

pub(super) async fn provider_checks(setup: &Setup) -> Vec<Finding> {
    let configured = match &setup.providers {
        Ok(p) => p.clone(),
        Err(e) => {
            return vec![Finding::fail(
                "providers",
                format!("cannot read the provider configuration: {e}"),
                "fix MAST_PROVIDERS or the config file's [[providers]] tables",
            )];
        }
    };
    // The same checks `mast serve` makes before it starts.
    if let Err(e) = Models::new(setup.anthropic.clone(), &configured)
        .and_then(|m| m.check_not_self(setup.listen, crate::tools::netguard::is_local))
    {
        return vec![Finding::fail(
            "providers",
            format!("{e:#}"),
            "fix the provider configuration",
        )];
    }
    let mut probes: Vec<Pin<Box<dyn Future<Output = Finding> + Send>>> = Vec::new();
    let a = &setup.anthropic;
    if a.api_key.is_some() || a.auth_token.is_some() || a.base_url_is_custom() {
        let base = a.base_url.trim_end_matches('/');
        probes.push(Box::pin(probe_models(
            "provider anthropic".into(),
            format!("{base}/v1/models"),
            anthropic_headers(a.api_key.as_deref(), a.auth_token.as_deref()),
            "ANTHROPIC_API_KEY (or MAST_ANTHROPIC_API_KEY) or ANTHROPIC_AUTH_TOKEN".into(),
        )));
    } else {
        probes.push(Box::pin(async {
            Finding::warn(
                "provider anthropic",
                "off: Claude models (claude-…) are not available, only configured providers and mast-scripted",
                "set ANTHROPIC_API_KEY (or MAST_ANTHROPIC_API_KEY) for the server",
            )
        }));
    }
    for p in configured {
        let check = format!("provider {}", p.name);
        let key = p
            .api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        let hint = match &p.api_key_env {
            Some(var) => format!("the key in {var}"),
            None => "the provider's api_key_env setting".into(),
        };
        if let (Some(var), None) = (&p.api_key_env, &key) {
            probes.push(Box::pin(std::future::ready(Finding::fail(
                check,
                format!("its key variable {var} is not set"),
                format!("set {var} for the server"),
            ))));
            continue;
        }
        let (url, headers) = match p.kind {
            ProviderKind::Anthropic => (
                format!(
                    "{}/v1/models",
                    p.base_url
                        .as_deref()
                        .unwrap_or("https://api.anthropic.com")
                        .trim_end_matches('/')
                ),
                anthropic_headers(key.as_deref(), None),
            ),
            ProviderKind::Openai => (
                format!(
                    "{}/models",
                    p.base_url.as_deref().unwrap_or("").trim_end_matches('/')
                ),
                key.map(|k| vec![("authorization", format!("Bearer {k}"))])
                    .unwrap_or_default(),
            ),
        };
        probes.push(Box::pin(probe_models(check, url, headers, hint)));
    }
    futures_util::future::join_all(probes).await
}
