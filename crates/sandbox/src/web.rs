//! `web_fetch` (a real HTTP GET, HTML rendered as readable text) and `web_search` (through a
//! configured SearXNG-compatible endpoint). Both obey the tool's domain lists and the
//! environment's networking policy.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolOutput;
use super::egress::EgressPolicy;
use super::netguard::NetGuard;
use mast_domain::tools::BuiltinToolConfig;

/// Largest body `web_fetch` reads.
const MAX_BODY_BYTES: usize = 10 << 20;
/// Largest HTML document rendered as text; beyond it the page is cut before rendering, which
/// keeps a hostile page from occupying a blocking thread for long.
const MAX_HTML_BYTES: usize = 2 << 20;
/// How long rendering one page may take.
const RENDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Characters returned when the tool sets no `max_content_tokens` (about 25k tokens).
const DEFAULT_MAX_CHARS: usize = 100_000;

/// Whether `host` is `domain` or one of its subdomains (`domain` may carry a path suffix,
/// which only web_search uses).
fn host_matches(host: &str, domain: &str) -> bool {
    let domain = domain
        .split('/')
        .next()
        .unwrap_or(domain)
        .trim_start_matches("*.")
        .to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    host == domain || host.ends_with(&format!(".{domain}"))
}

fn domain_refusal(host: &str, config: Option<&BuiltinToolConfig>) -> Option<String> {
    let config = config?;
    if let Some(allowed) = &config.allowed_domains
        && !allowed.iter().any(|d| host_matches(host, d))
    {
        return Some(format!(
            "`{host}` is not in this tool's allowed_domains ({})",
            allowed.join(", ")
        ));
    }
    if let Some(blocked) = &config.blocked_domains
        && blocked.iter().any(|d| host_matches(host, d))
    {
        return Some(format!("`{host}` is in this tool's blocked_domains"));
    }
    None
}

fn check_url(
    url: &reqwest::Url,
    config: Option<&BuiltinToolConfig>,
    egress: &EgressPolicy,
    guard: NetGuard,
) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched (got `{}`)",
            url.scheme()
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| "the URL has no host".to_string())?;
    if let Some(why) = domain_refusal(host, config) {
        return Err(why);
    }
    if !egress.allows(host) {
        return Err(format!(
            "`{host}` is not reachable: this environment's networking only allows its allowed_hosts"
        ));
    }
    // Names are checked when they resolve (the client's resolver is the guard); literal
    // addresses never resolve, so they are checked here.
    match host.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
        Ok(ip) => guard.check(ip),
        Err(_) => Ok(()),
    }
}

#[derive(Deserialize)]
struct FetchInput {
    url: String,
}

/// `web_fetch`.
pub async fn fetch(
    input: &Value,
    config: Option<&BuiltinToolConfig>,
    egress: &EgressPolicy,
    guard: NetGuard,
) -> ToolOutput {
    let input: FetchInput = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid web_fetch input ({e}). Send {{\"url\": \"https://...\"}}."
            ));
        }
    };
    let url = match reqwest::Url::parse(input.url.trim()) {
        Ok(u) => u,
        Err(e) => return ToolOutput::error(format!("`url` is not a valid URL: {e}")),
    };
    if let Err(why) = check_url(&url, config, egress, guard) {
        return ToolOutput::error(format!("Refused to fetch {url}: {why}."));
    }
    let (cfg, policy) = (config.cloned(), egress.clone());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .user_agent("Mast web_fetch")
        // Straight to the checked addresses: a proxy would resolve names itself.
        .no_proxy()
        .dns_resolver(Arc::new(guard))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 5 {
                return attempt.error("too many redirects");
            }
            match check_url(attempt.url(), cfg.as_ref(), &policy, guard) {
                Ok(()) => attempt.follow(),
                Err(why) => attempt.error(why),
            }
        }))
        .build()
        .expect("http client");
    let resp = match client.get(url.clone()).send().await {
        Ok(r) => r,
        Err(e) => {
            let why = mast_domain::error_chain::chain(&e);
            if why.contains("internal address") {
                return ToolOutput::error(format!("Refused to fetch {url}: {why}."));
            }
            return ToolOutput::error(format!(
                "Fetching {url} failed: {why}. The page may be down or refused; retrying later may help."
            ));
        }
    };
    let status = resp.status();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    let mut truncated = false;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY_BYTES {
            body.truncate(MAX_BODY_BYTES);
            truncated = true;
            break;
        }
    }
    let text =
        if content_type.contains("html") || (content_type.is_empty() && body.starts_with(b"<")) {
            match render_html(body).await {
                Ok(text) => text,
                Err(why) => return ToolOutput::error(format!("{url}: {why}")),
            }
        } else if content_type.starts_with("text/")
            || content_type.contains("json")
            || content_type.contains("xml")
            || content_type.is_empty()
        {
            String::from_utf8_lossy(&body).into_owned()
        } else {
            return ToolOutput::error(format!(
                "{url} returned `{content_type}`, which web_fetch cannot show as text."
            ));
        };
    let max_chars = config
        .and_then(|c| c.max_content_tokens)
        .map(|t| (t as usize).saturating_mul(4))
        .unwrap_or(DEFAULT_MAX_CHARS);
    let mut out: String = text.chars().take(max_chars).collect();
    if out.len() < text.len() || truncated {
        out.push_str("\n[content truncated]");
    }
    if !status.is_success() {
        return ToolOutput::error(format!("{url} answered HTTP {}:\n{out}", status.as_u16()));
    }
    ToolOutput::text(format!("Content of {url}:\n\n{out}"))
}

/// Renders HTML as readable text off the async threads, cut to [`MAX_HTML_BYTES`] first.
async fn render_html(mut body: Vec<u8>) -> Result<String, String> {
    let cut = body.len() > MAX_HTML_BYTES;
    body.truncate(MAX_HTML_BYTES);
    let render = tokio::task::spawn_blocking(move || {
        html2text::from_read(&body[..], 100)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned())
    });
    match tokio::time::timeout(RENDER_TIMEOUT, render).await {
        Ok(Ok(mut text)) => {
            if cut {
                text.push_str("\n[page cut at 2 MiB before rendering]");
            }
            Ok(text)
        }
        Ok(Err(_)) => Err("the page could not be rendered as text".into()),
        Err(_) => Err("the page took too long to render as text; try a simpler URL (for example a raw or print version)".into()),
    }
}

#[derive(Deserialize)]
struct SearchInput {
    query: String,
}

/// `web_search` through `endpoint` (`GET endpoint?q=...&format=json`, SearXNG's API); with no
/// endpoint configured it says so rather than inventing results.
pub async fn search(
    input: &Value,
    config: Option<&BuiltinToolConfig>,
    egress: &EgressPolicy,
    endpoint: Option<&str>,
) -> ToolOutput {
    let input: SearchInput = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid web_search input ({e}). Send {{\"query\": \"...\"}}."
            ));
        }
    };
    let Some(endpoint) = endpoint else {
        return ToolOutput::error(
            "web_search is not available: this server has no search provider configured (the operator can set \
             MAST_WEB_SEARCH_URL to a SearXNG-compatible endpoint). Answer from what you know or use web_fetch on a known URL.",
        );
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("http client");
    let resp = client
        .get(endpoint)
        .query(&[("q", input.query.as_str()), ("format", "json")])
        .send()
        .await;
    let body: Value = match resp {
        Ok(r) if r.status().is_success() => match r.json().await {
            Ok(v) => v,
            Err(e) => {
                return ToolOutput::error(format!(
                    "The search provider returned an unreadable answer: {e}"
                ));
            }
        },
        Ok(r) => {
            return ToolOutput::error(format!(
                "The search provider answered HTTP {}; retrying later may help.",
                r.status().as_u16()
            ));
        }
        Err(e) => {
            return ToolOutput::error(format!("The search provider could not be reached: {e}"));
        }
    };
    let mut blocks = Vec::new();
    for r in body
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(url), Some(title)) = (
            r.get("url").and_then(Value::as_str),
            r.get("title").and_then(Value::as_str),
        ) else {
            continue;
        };
        let host = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        if domain_refusal(&host, config).is_some() || !egress.allows(&host) {
            continue;
        }
        let snippet = r
            .get("content")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(title);
        blocks.push(
            json!({"type": "search_result", "source": url, "title": title,
            "content": [{"type": "text", "text": snippet}], "citations": {"enabled": false}}),
        );
        if blocks.len() == 10 {
            break;
        }
    }
    if blocks.is_empty() {
        return ToolOutput::text(format!("No results for `{}`.", input.query));
    }
    ToolOutput {
        content: blocks,
        is_error: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        assert!(host_matches("docs.rs", "docs.rs") && host_matches("a.docs.rs", "docs.rs"));
        assert!(!host_matches("notdocs.rs", "docs.rs"));
        assert!(host_matches("example.com", "example.com/blog"));
    }
}
