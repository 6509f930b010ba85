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

/// One price band's rates, in nanodollars per token (dollars per million tokens × 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    pub input: Nanos,
    pub output: Nanos,
    /// Prompt-cache writes kept five minutes.
    pub cache_write_5m: Nanos,
    /// Prompt-cache writes kept one hour.
    pub cache_write_1h: Nanos,
    pub cache_read: Nanos,
}

impl Rates {
    /// Anthropic's usual ratios from the input and output prices: cache writes at 1.25×
    /// (5 minutes) and 2× (1 hour) the input price, cache reads at 0.1×.
    const fn usual(input: Nanos, output: Nanos) -> Self {
        Rates {
            input,
            output,
            cache_write_5m: input * 5 / 4,
            cache_write_1h: input * 2,
            cache_read: input / 10,
        }
    }
}

/// The rates of a request whose prompt is over a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongPrompt {
    /// Prompt tokens (input, cache writes and cache reads) a request must exceed.
    pub over_tokens: i64,
    /// The rates of every token of such a request, output included.
    pub rates: Rates,
}

/// One model's list prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPrice {
    /// The rates of a request within the model's usual prompt size.
    pub rates: Rates,
    /// Dearer rates past a prompt size, for models priced in bands.
    pub long_prompt: Option<LongPrompt>,
}

impl ModelPrice {
    /// The rates one request is charged at: its prompt size picks the band.
    pub fn rates_for(&self, u: &ModelUsage) -> Rates {
        let prompt = u.input_tokens.max(0)
            + u.cache_creation_input_tokens.max(0)
            + u.cache_read_input_tokens.max(0);
        match self.long_prompt {
            Some(long) if prompt > long.over_tokens => long.rates,
            _ => self.rates,
        }
    }

    /// What one request's usage costs.
    pub fn cost(&self, u: &ModelUsage) -> Nanos {
        let r = self.rates_for(u);
        let one_hour = u
            .ephemeral_1h_input_tokens
            .clamp(0, u.cache_creation_input_tokens.max(0));
        let five_min = u.cache_creation_input_tokens.max(0) - one_hour;
        u.input_tokens.max(0) * r.input
            + u.output_tokens.max(0) * r.output
            + five_min * r.cache_write_5m
            + one_hour * r.cache_write_1h
            + u.cache_read_input_tokens.max(0) * r.cache_read
    }
}

/// The built-in list prices of Claude models: a data file in the shape of the config file's
/// `[prices]`, so an operator can copy an entry and change it.
const CLAUDE_PRICES_TOML: &str = include_str!("claude_prices.toml");

/// The built-in table, read once; the data file is checked by this crate's tests.
static CLAUDE_PRICES: std::sync::LazyLock<BTreeMap<String, ModelPrice>> =
    std::sync::LazyLock::new(|| {
        built_in(CLAUDE_PRICES_TOML).expect("the built-in Claude price table is valid")
    });

/// Reads a price table written as the config file's `[prices]`.
fn built_in(text: &str) -> Result<BTreeMap<String, ModelPrice>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        prices: BTreeMap<String, PriceConfig>,
    }
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    Ok(Prices::parse(file.prices)?.configured)
}

/// A configured price, in dollars per million tokens (numbers or decimal strings): the usual
/// rates and, for a model priced in bands, the rates past a prompt size. Cache prices left
/// out are derived from `input` at the usual ratios.
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
    /// `{over_tokens, input, output, cache_…?}`: the band past `over_tokens` prompt tokens.
    #[serde(default)]
    pub long_prompt: Option<LongPromptConfig>,
}

/// A configured band past a prompt size. It repeats [`PriceConfig`]'s rate fields because
/// serde cannot flatten a shared struct into one that refuses unknown keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongPromptConfig {
    pub over_tokens: u32,
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
            let rates = parse_rates(
                "",
                [
                    Some(&c.input),
                    Some(&c.output),
                    c.cache_write_5m.as_ref(),
                    c.cache_write_1h.as_ref(),
                    c.cache_read.as_ref(),
                ],
            )
            .map_err(|e| format!("price of `{model}`: {e}"))?;
            let long_prompt = match &c.long_prompt {
                None => None,
                Some(l) => Some(LongPrompt {
                    over_tokens: i64::from(l.over_tokens),
                    rates: parse_rates(
                        "long_prompt.",
                        [
                            Some(&l.input),
                            Some(&l.output),
                            l.cache_write_5m.as_ref(),
                            l.cache_write_1h.as_ref(),
                            l.cache_read.as_ref(),
                        ],
                    )
                    .map_err(|e| format!("price of `{model}`: {e}"))?,
                }),
            };
            configured.insert(model, ModelPrice { rates, long_prompt });
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
            .find(|(id, _)| matches_id(model, id))
            .map(|(_, p)| *p)
    }

    /// What one request of `model` cost; None for a model with no price.
    pub fn cost(&self, model: &str, u: &ModelUsage) -> Option<Nanos> {
        self.of(model).map(|p| p.cost(u))
    }
}

/// One band's rates from its configured fields (input, output, cache writes 5 m and 1 h,
/// cache reads); `prefix` names the band in errors.
fn parse_rates(prefix: &str, fields: [Option<&Value>; 5]) -> Result<Rates, String> {
    const NAMES: [&str; 5] = [
        "input",
        "output",
        "cache_write_5m",
        "cache_write_1h",
        "cache_read",
    ];
    let mut parsed = [None; 5];
    for (i, v) in fields.iter().enumerate() {
        if let Some(v) = v {
            parsed[i] = Some(per_token(v).map_err(|e| format!("`{prefix}{}` {e}", NAMES[i]))?);
        }
    }
    let usual = Rates::usual(parsed[0].unwrap_or(0), parsed[1].unwrap_or(0));
    Ok(Rates {
        cache_write_5m: parsed[2].unwrap_or(usual.cache_write_5m),
        cache_write_1h: parsed[3].unwrap_or(usual.cache_write_1h),
        cache_read: parsed[4].unwrap_or(usual.cache_read),
        ..usual
    })
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

    fn rates(p: &ModelPrice) -> (Nanos, Nanos, Nanos, Nanos, Nanos) {
        let r = p.rates;
        (
            r.input,
            r.output,
            r.cache_write_5m,
            r.cache_write_1h,
            r.cache_read,
        )
    }

    #[test]
    fn claude_prices_match_ids_with_dates_and_aliases_only() {
        let p = Prices::default();
        let sonnet = p.of("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(rates(&sonnet), (3_000, 15_000, 3_750, 6_000, 300));
        assert_eq!(p.of("claude-opus-4-20250514").unwrap().rates.input, 15_000);
        assert_eq!(p.of("claude-opus-4-5").unwrap().rates.input, 5_000);
        assert_eq!(
            p.of("claude-3-5-haiku-latest").unwrap().rates.cache_read,
            80
        );
        // A longer id is another model, not a dated one.
        assert_eq!(p.of("claude-opus-4-9"), None);
        assert_eq!(p.of("claude-opus-5-5-extra"), None);
        assert_eq!(p.of("gpt-4o"), None);
        // Opus 5 and Opus 5.5 are different models with different prices.
        assert_eq!(p.of("claude-opus-5").unwrap().rates.input, 5_000);
        assert_eq!(p.of("claude-opus-5-5").unwrap().rates.input, 4_000);
    }

    #[test]
    fn every_current_claude_model_has_a_price() {
        let p = Prices::default();
        for model in [
            "claude-fable-5-2",
            "claude-mythos-5-2",
            "claude-fable-5-1",
            "claude-mythos-5-1",
            "claude-fable-5",
            "claude-mythos-5",
            "claude-opus-5-5",
            "claude-opus-5",
            "claude-opus-4-8",
            "claude-opus-4-7",
            "claude-opus-4-6",
            "claude-opus-4-5",
            "claude-sonnet-5-5",
            "claude-sonnet-5",
            "claude-sonnet-4-6",
            "claude-sonnet-4-5",
            "claude-haiku-5-5",
            "claude-haiku-4-5",
        ] {
            assert!(p.of(model).is_some(), "{model} has no built-in price");
        }
        // Cache reads that depart from a tenth of the input price.
        assert_eq!(
            rates(&p.of("claude-opus-5-5").unwrap()),
            (4_000, 20_000, 5_000, 8_000, 200)
        );
        assert_eq!(
            rates(&p.of("claude-sonnet-5-5").unwrap()),
            (2_000, 10_000, 2_500, 4_000, 100)
        );
        assert_eq!(p.of("claude-fable-5-1").unwrap().rates.cache_read, 250);
        assert_eq!(p.of("claude-fable-5").unwrap().rates.cache_read, 1_000);
        assert_eq!(
            rates(&p.of("claude-3-haiku").unwrap()),
            (250, 1_250, 300, 500, 30)
        );
    }

    #[test]
    fn a_long_prompt_moves_every_token_of_its_request_to_the_dearer_band() {
        let haiku = Prices::default().of("claude-haiku-5-5").unwrap();
        assert_eq!(rates(&haiku), (100, 500, 125, 200, 10));
        // 60K input + 20K cache writes + 20K cache reads is exactly 100K: the lower band.
        let at = usage(60_000, 1_000, 20_000, 0, 20_000);
        assert_eq!(
            haiku.cost(&at),
            60_000 * 100 + 1_000 * 500 + 20_000 * 125 + 20_000 * 10
        );
        // One token more and the whole request, output included, is at the upper band.
        let over = usage(60_001, 1_000, 20_000, 0, 20_000);
        assert_eq!(
            haiku.cost(&over),
            60_001 * 500 + 1_000 * 2_500 + 20_000 * 625 + 20_000 * 50
        );
        let sonnet = Prices::default().of("claude-sonnet-4-5").unwrap();
        assert_eq!(
            sonnet.cost(&usage(200_001, 10, 0, 0, 0)),
            200_001 * 6_000 + 10 * 22_500
        );
        assert_eq!(
            sonnet.cost(&usage(200_000, 10, 0, 0, 0)),
            200_000 * 3_000 + 10 * 15_000
        );
        // Sonnet 4.6 has no long-context surcharge.
        let s46 = Prices::default().of("claude-sonnet-4-6").unwrap();
        assert_eq!(s46.long_prompt, None);
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
                "claude-sonnet-4-5": {"input": 1, "output": 2},
                "banded": {"input": 1, "output": 2,
                           "long_prompt": {"over_tokens": 10, "input": 3, "output": "4.5"}}}"#,
        )
        .unwrap();
        let p = Prices::parse(entries).unwrap();
        let gpt = p.of("gpt-4o").unwrap();
        assert_eq!(rates(&gpt), (2_500, 10_000, 3_125, 5_000, 1_250));
        assert_eq!(p.of("claude-sonnet-4-5").unwrap().rates.output, 2_000);
        assert_eq!(
            p.of("claude-sonnet-4-5-20250929").unwrap().rates.output,
            15_000
        );
        let banded = p.of("banded").unwrap();
        assert_eq!(banded.cost(&usage(10, 1, 0, 0, 0)), 10 * 1_000 + 2_000);
        assert_eq!(banded.cost(&usage(11, 1, 0, 0, 0)), 11 * 3_000 + 4_500);
        for (bad, field) in [
            (r#"{"m": {"input": "1.2345", "output": 1}}"#, "`input`"),
            (r#"{"m": {"input": -1, "output": 1}}"#, "`input`"),
            (r#"{"m": {"input": "x", "output": 1}}"#, "`input`"),
            (
                r#"{"m": {"input": 1, "output": 1, "long_prompt": {"over_tokens": 5, "input": "y", "output": 1}}}"#,
                "`long_prompt.input`",
            ),
        ] {
            let e: BTreeMap<String, PriceConfig> = serde_json::from_str(bad).unwrap();
            let err = Prices::parse(e).unwrap_err();
            assert!(err.contains(&format!("price of `m`: {field}")), "{err}");
        }
    }

    #[test]
    fn the_built_in_table_is_written_as_the_config_file_writes_prices() {
        // The data file reads with the operator's own parser; an unknown field fails.
        assert!(built_in(CLAUDE_PRICES_TOML).unwrap().len() >= 18);
        let err = built_in("[prices.m]\ninput = 1\noutput = 1\ncache_reads = 1\n").unwrap_err();
        assert!(err.contains("cache_reads"), "{err}");
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
