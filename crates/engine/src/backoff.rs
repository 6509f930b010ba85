//! How long a runner waits before retrying a transient model error.

use std::time::Duration;

/// The delay before retry `attempt` (1-based): `base` doubled per earlier attempt, raised to
/// the provider's `Retry-After` when it asks for longer, and never beyond `cap` — so a
/// provider asking for minutes cannot park a session past the operator's bound (the retries
/// that follow still honour whatever it says next).
pub fn delay(
    base: Duration,
    cap: Duration,
    attempt: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    exp.max(retry_after.unwrap_or_default()).min(cap)
}

#[cfg(test)]
mod tests {
    use super::delay;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn doubles_honours_retry_after_and_caps() {
        // (base, cap, attempt, retry_after) -> delay
        let cases = [
            ((100, 1_000, 1, None), 100),
            ((100, 1_000, 2, None), 200),
            ((100, 1_000, 4, None), 800),
            ((100, 1_000, 5, None), 1_000),
            ((100, 1_000, 40, None), 1_000),
            // A longer Retry-After wins over the exponential step…
            ((100, 1_000, 1, Some(500)), 500),
            // …a shorter one does not shorten it…
            ((100, 1_000, 3, Some(50)), 400),
            // …and the cap bounds both.
            ((100, 1_000, 1, Some(60_000)), 1_000),
            ((100, 1_000, 9, Some(60_000)), 1_000),
            ((1_000, 30_000, 1, Some(120_000)), 30_000),
        ];
        for ((base, cap, attempt, after), want) in cases {
            assert_eq!(
                delay(ms(base), ms(cap), attempt, after.map(ms)),
                ms(want),
                "base {base} cap {cap} attempt {attempt} retry_after {after:?}"
            );
        }
    }
}
