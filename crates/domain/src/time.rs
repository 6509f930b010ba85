//! Timestamps: microseconds since the Unix epoch in storage, RFC 3339 (UTC, `Z`) on the wire.
//! The current time comes from a [`Clock`](crate::clock::Clock), never from here.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Microseconds since the Unix epoch; what every stored timestamp column holds.
pub type Micros = i64;

/// Formats a stored timestamp as RFC 3339 in UTC, e.g. `2026-03-15T10:00:00.123456Z`.
pub fn format(micros: Micros) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(micros as i128 * 1000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

/// Formats an optional timestamp (`null` on the wire for "not yet").
pub fn format_opt(micros: Option<Micros>) -> Option<String> {
    micros.map(format)
}

/// Parses an RFC 3339 timestamp with any offset and optional fractional seconds.
pub fn parse(s: &str) -> Option<Micros> {
    let t = OffsetDateTime::parse(s.trim(), &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_accepts_offsets() {
        let t = parse("2026-03-15T10:00:00Z").unwrap();
        assert_eq!(format(t), "2026-03-15T10:00:00Z");
        assert_eq!(parse("2026-03-15T11:00:00+01:00"), Some(t));
        assert_eq!(parse("2026-03-15T10:00:00.5Z"), Some(t + 500_000));
        assert!(format(t + 1).starts_with("2026-03-15T10:00:00.000001"));
        assert_eq!(parse("yesterday"), None);
    }
}
