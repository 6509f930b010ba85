//! A session's budget: `{"type": "limit", "max_list_cost": {"amount":
//! "<cents>", "currency": "USD"}}`, read strictly.

use serde_json::{Value, json};

use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid};

/// Largest cap accepted, in cents ($10 billion): keeps every sum in nanodollars far from
/// overflowing.
const MAX_CENTS: i64 = 1_000_000_000_000;

/// Reads a budget object: its cap in cents (at least one).
pub fn parse(at: &str, v: &Value) -> Valid<i64> {
    tag(at, v, &["limit"])?;
    let o = Obj::new(at, v, "a budget", &["type", "max_list_cost"])?;
    let cost_at = o.path("max_list_cost");
    let Some(cost) = o.raw("max_list_cost").filter(|c| !c.is_null()) else {
        return Err(Invalid::new(format!("`{cost_at}` is required")));
    };
    let c = Obj::new(&cost_at, cost, "a monetary amount", &["amount", "currency"])?;
    let currency = c.req_str("currency")?;
    if currency != "USD" {
        return Err(Invalid::new(format!(
            "`{}` must be `USD`, the only currency priced (got `{currency}`)",
            c.path("currency")
        )));
    }
    let amount_at = c.path("amount");
    let amount = match c.raw("amount") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(must_be(
                &amount_at,
                "a string of whole cents such as \"2500\"",
                other,
            ));
        }
        None => return Err(Invalid::new(format!("`{amount_at}` is required"))),
    };
    let well_formed = !amount.is_empty()
        && amount.bytes().all(|b| b.is_ascii_digit())
        && (amount == "0" || !amount.starts_with('0'));
    let cents: i64 = match amount.parse() {
        Ok(n) if well_formed && n <= MAX_CENTS => n,
        _ => {
            return Err(Invalid::new(format!(
                "`{amount_at}` must be whole cents as digits without leading zeros, at most {MAX_CENTS} (got `{amount}`)"
            )));
        }
    };
    if cents < 1 {
        return Err(Invalid::new(format!(
            "`{amount_at}` must be at least one cent"
        )));
    }
    Ok(cents)
}

/// The wire budget of a cap in cents.
pub fn to_json(cents: i64) -> Value {
    json!({ "type": "limit", "max_list_cost": { "amount": cents.to_string(), "currency": "USD" } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_read_strictly() {
        let ok = json!({"type": "limit", "max_list_cost": {"amount": "2500", "currency": "USD"}});
        assert_eq!(parse("budget", &ok), Ok(2500));
        assert_eq!(to_json(2500), ok);
        for (bad, says) in [
            (json!({"type": "cap"}), "`budget.type`"),
            (
                json!({"type": "limit"}),
                "`budget.max_list_cost` is required",
            ),
            (
                json!({"type": "limit", "max_list_cost": {"amount": 25, "currency": "USD"}}),
                "`budget.max_list_cost.amount` must be a string",
            ),
            (
                json!({"type": "limit", "max_list_cost": {"amount": "025", "currency": "USD"}}),
                "without leading zeros",
            ),
            (
                json!({"type": "limit", "max_list_cost": {"amount": "2.5", "currency": "USD"}}),
                "whole cents",
            ),
            (
                json!({"type": "limit", "max_list_cost": {"amount": "0", "currency": "USD"}}),
                "at least one cent",
            ),
            (
                json!({"type": "limit", "max_list_cost": {"amount": "1", "currency": "EUR"}}),
                "must be `USD`",
            ),
            (
                json!({"type": "limit", "max_list_cost": {"amount": "1", "currency": "USD", "x": 1}}),
                "x",
            ),
        ] {
            let e = parse("budget", &bad).unwrap_err();
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }
}
