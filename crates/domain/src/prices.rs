//! List prices and list cost: what each model's tokens cost, what a web search
//! and an hour of runtime cost, and the money arithmetic a budget is enforced with.
//!
//! Money is counted in integer nanodollars (`Nanos`), never in floating point: a price in
//! dollars per million tokens with up to three decimals is a whole number of nanodollars per
//! token, so a request's cost is exact, sums stay exact, and only the figure shown to clients
//! is rounded (to the cent).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::session::{ModelUsage, SessionUsage};

/// An amount of US dollars in billionths.
pub type Nanos = i64;

/// Nanodollars in a cent.
pub const NANOS_PER_CENT: Nanos = 10_000_000;
/// One web search: $10 per thousand.
pub const WEB_SEARCH_NANOS: Nanos = 10_000_000;
/// Runtime: $0.08 per hour of session activity.
pub const RUNTIME_NANOS_PER_HOUR: i128 = 80_000_000;

/// One model's list prices, in nanodollars per token (dollars per million tokens × 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPrice {
    pub input: Nanos,
    pub output: Nanos,
    /// Prompt-cache writes kept five minutes.
    pub cache_write_5m: Nanos,
    /// Prompt-cache writes kept one hour.
    pub cache_write_1h: Nanos,
    pub cache_read: Nanos,
}

impl ModelPrice {
    /// Anthropic's usual ratios from the input and output prices ($/MTok): cache writes at
    /// 1.25× (5 minutes) and 2× (1 hour) the input price, cache reads at 0.1×.
    const fn claude(input_milli: Nanos, output_milli: Nanos) -> Self {
        ModelPrice {
            input: input_milli,
            output: output_milli,
            cache_write_5m: input_milli * 5 / 4,
            cache_write_1h: input_milli * 2,
            cache_read: input_milli / 10,
        }
    }

    /// What one request's usage costs.
    pub fn cost(&self, u: &ModelUsage) -> Nanos {
        let one_hour = u
            .ephemeral_1h_input_tokens
            .clamp(0, u.cache_creation_input_tokens.max(0));
        let five_min = u.cache_creation_input_tokens.max(0) - one_hour;
        u.input_tokens.max(0) * self.input
            + u.output_tokens.max(0) * self.output
            + five_min * self.cache_write_5m
            + one_hour * self.cache_write_1h
            + u.cache_read_input_tokens.max(0) * self.cache_read
    }
}

/// Built-in list prices of Claude models ($/MTok × 1000), matched by id or by id plus a date
/// or `-latest` suffix. Models not listed (and every other provider's) have a price once it is
/// configured (`MAST_PRICES` or `[prices]` in the config file).
const CLAUDE_PRICES: &[(&str, Nanos, Nanos)] = &[
    ("claude-opus-4-5", 5_000, 25_000),
    ("claude-opus-4-1", 15_000, 75_000),
    ("claude-opus-4-0", 15_000, 75_000),
    ("claude-opus-4", 15_000, 75_000),
    ("claude-sonnet-4-5", 3_000, 15_000),
    ("claude-sonnet-4-0", 3_000, 15_000),
    ("claude-sonnet-4", 3_000, 15_000),
    ("claude-3-7-sonnet", 3_000, 15_000),
    ("claude-3-5-sonnet", 3_000, 15_000),
    ("claude-haiku-4-5", 1_000, 5_000),
    ("claude-3-5-haiku", 800, 4_000),
    ("claude-3-haiku", 250, 1_250),
    ("claude-3-opus", 15_000, 75_000),
];

/// A configured price, in dollars per million tokens (numbers or decimal strings). Cache
/// prices left out are derived from `input` as for Claude models.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub input: Value,
    pub output: Value,
    #[serde(default)]
    pub cache_write_5m: Option<Value>,
    #[serde(default)]
    pub cache_write_1h: Option<Value>,
    #[serde(default)]
    pub cache_read: Option<Value>,
}

/// The price table: configured entries first, then the built-in Claude prices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    configured: BTreeMap<String, ModelPrice>,
}

impl Prices {
    /// The table with `configured` prices (by exact model id) over the built-in ones.
    pub fn new(configured: BTreeMap<String, ModelPrice>) -> Self {
        Prices { configured }
    }

    /// Reads configured prices: a map from model id to [`PriceConfig`].
    pub fn parse(entries: BTreeMap<String, PriceConfig>) -> Result<Self, String> {
        let mut configured = BTreeMap::new();
        for (model, c) in entries {
            let field = |name: &str, v: &Value| {
                per_token(v).map_err(|e| format!("price of `{model}`: `{name}` {e}"))
            };
            let input = field("input", &c.input)?;
            let derived = ModelPrice::claude(input, field("output", &c.output)?);
            let opt = |name: &str, v: &Option<Value>, default: Nanos| match v {
                Some(v) => field(name, v),
                None => Ok(default),
            };
            configured.insert(
                model.clone(),
                ModelPrice {
                    cache_write_5m: opt(
                        "cache_write_5m",
                        &c.cache_write_5m,
                        derived.cache_write_5m,
                    )?,
                    cache_write_1h: opt(
                        "cache_write_1h",
                        &c.cache_write_1h,
                        derived.cache_write_1h,
                    )?,
                    cache_read: opt("cache_read", &c.cache_read, derived.cache_read)?,
                    ..derived
                },
            );
        }
        Ok(Prices { configured })
    }

    /// The list price of `model`, if known.
    pub fn of(&self, model: &str) -> Option<ModelPrice> {
        if let Some(p) = self.configured.get(model) {
            return Some(*p);
        }
        CLAUDE_PRICES
            .iter()
            .find(|(id, _, _)| matches_id(model, id))
            .map(|(_, i, o)| ModelPrice::claude(*i, *o))
    }

    /// What one request of `model` cost; None for a model with no price.
    pub fn cost(&self, model: &str, u: &ModelUsage) -> Option<Nanos> {
        self.of(model).map(|p| p.cost(u))
    }
}

/// `model` is `id`, or `id` with a date (`-20250929`) or `-latest` suffix.
fn matches_id(model: &str, id: &str) -> bool {
    match model.strip_prefix(id) {
        Some("") => true,
        Some(rest) => match rest.strip_prefix('-') {
            Some("latest") => true,
            Some(d) => d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()),
            None => false,
        },
        None => false,
    }
}

/// Dollars per million tokens (a number or decimal string, at most three decimals) as
/// nanodollars per token.
fn per_token(v: &Value) -> Result<Nanos, String> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return Err("must be a number of dollars per million tokens".into()),
    };
    let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(frac.is_empty() || digits(frac)) || frac.len() > 3 {
        return Err(format!(
            "must be dollars per million tokens with at most three decimals, got `{text}`"
        ));
    }
    let whole: Nanos = whole
        .parse()
        .map_err(|_| format!("is too large: `{text}`"))?;
    let frac: Nanos = format!("{frac:0<3}").parse().unwrap_or(0);
    whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(frac))
        .ok_or_else(|| format!("is too large: `{text}`"))
}

/// What tokens were spent on, and whether all of it was priced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Spend {
    /// Token cost of every priced request, exact.
    #[serde(default)]
    pub tokens: Nanos,
    /// A request ran on a model with no list price: the list cost is unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unpriced: bool,
}

impl Spend {
    /// Adds one request's cost (None: its model has no price).
    pub fn add(&mut self, cost: Option<Nanos>) {
        match cost {
            Some(n) => self.tokens += n,
            None => self.unpriced = true,
        }
    }

    /// The list cost: tokens, web searches and `active_micros` of runtime. None when part of
    /// the usage has no price.
    pub fn list_cost(&self, usage: &SessionUsage, active_micros: i64) -> Option<Nanos> {
        if self.unpriced {
            return None;
        }
        let runtime = i128::from(active_micros.max(0)) * RUNTIME_NANOS_PER_HOUR / 3_600_000_000;
        Some(
            self.tokens
                + usage.server_tool_use.web_search_requests.max(0) * WEB_SEARCH_NANOS
                + runtime as Nanos,
        )
    }
}

/// Nanodollars as the wire's monetary amount, rounded to the nearest cent (half up).
pub fn amount(nanos: Nanos) -> Value {
    let cents = (nanos.max(0) + NANOS_PER_CENT / 2) / NANOS_PER_CENT;
    json!({ "amount": cents.to_string(), "currency": "USD" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(i: i64, o: i64, cw: i64, cw1h: i64, cr: i64) -> ModelUsage {
        ModelUsage {
            input_tokens: i,
            output_tokens: o,
            cache_creation_input_tokens: cw,
            cache_read_input_tokens: cr,
            ephemeral_1h_input_tokens: cw1h,
        }
    }

    #[test]
    fn claude_prices_match_ids_with_dates_and_aliases_only() {
        let p = Prices::default();
        let sonnet = p.of("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(
            (
                sonnet.input,
                sonnet.output,
                sonnet.cache_write_5m,
                sonnet.cache_write_1h,
                sonnet.cache_read
            ),
            (3_000, 15_000, 3_750, 6_000, 300)
        );
        assert_eq!(p.of("claude-opus-4-20250514").unwrap().input, 15_000);
        assert_eq!(p.of("claude-opus-4-5").unwrap().input, 5_000);
        assert_eq!(p.of("claude-3-5-haiku-latest").unwrap().cache_read, 80);
        // A longer id is another model, not a dated one.
        assert_eq!(p.of("claude-opus-4-8"), None);
        assert_eq!(p.of("gpt-4o"), None);
    }

    #[test]
    fn a_request_costs_its_tokens_at_their_prices_exactly() {
        let p = Prices::default().of("claude-sonnet-4-5").unwrap();
        // 1000 in, 200 out, 400 cache writes of which 100 for an hour, 50 cache reads:
        // 3.000 + 3.000 + 1.125 + 0.600 + 0.015 = 7.740 thousandths of a dollar.
        assert_eq!(p.cost(&usage(1000, 200, 400, 100, 50)), 7_740_000);
        assert_eq!(amount(7_740_000)["amount"], "1");
        assert_eq!(amount(4_999_999)["amount"], "0");
        assert_eq!(amount(5_000_000)["amount"], "1");
        assert_eq!(amount(2_500 * NANOS_PER_CENT)["amount"], "2500");
    }

    #[test]
    fn configured_prices_override_and_extend_the_table() {
        let entries: BTreeMap<String, PriceConfig> = serde_json::from_str(
            r#"{"gpt-4o": {"input": "2.50", "output": 10, "cache_read": "1.25"},
                "claude-sonnet-4-5": {"input": 1, "output": 2}}"#,
        )
        .unwrap();
        let p = Prices::parse(entries).unwrap();
        let gpt = p.of("gpt-4o").unwrap();
        assert_eq!(
            (gpt.input, gpt.output, gpt.cache_read, gpt.cache_write_5m),
            (2_500, 10_000, 1_250, 3_125)
        );
        assert_eq!(p.of("claude-sonnet-4-5").unwrap().output, 2_000);
        assert_eq!(p.of("claude-sonnet-4-5-20250929").unwrap().output, 15_000);
        for bad in [
            r#"{"m": {"input": "1.2345", "output": 1}}"#,
            r#"{"m": {"input": -1, "output": 1}}"#,
            r#"{"m": {"input": "x", "output": 1}}"#,
        ] {
            let e: BTreeMap<String, PriceConfig> = serde_json::from_str(bad).unwrap();
            let err = Prices::parse(e).unwrap_err();
            assert!(err.contains("price of `m`: `input`"), "{err}");
        }
    }

    #[test]
    fn list_cost_adds_searches_and_runtime_and_is_unknown_once_unpriced() {
        let mut s = Spend::default();
        s.add(Some(1_000));
        let mut u = SessionUsage::default();
        u.server_tool_use.web_search_requests = 2;
        // One hour of runtime is 8 cents.
        assert_eq!(
            s.list_cost(&u, 3_600_000_000),
            Some(1_000 + 20_000_000 + 80_000_000)
        );
        s.add(None);
        assert_eq!(s.list_cost(&u, 0), None);
    }
}
