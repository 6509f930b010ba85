//! Deployment schedules: 5-field POSIX cron expressions evaluated in an IANA
//! time zone.
//!
//! Parsing and evaluation use `croner` over `jiff` zoned times: croner is maintained, handles
//! daylight-saving gaps and folds, and evaluates in any `jiff` zone; jiff carries its own copy
//! of the tz database (`tzdb-bundle-always`), so a zone name is valid or not the same way on
//! every host, with or without `/usr/share/zoneinfo`. croner accepts more than POSIX cron
//! (seconds, `L`, `W`, `#`, `?`, names, `@daily`), so the grammar is checked here first.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fields::{Obj, tag};
use super::invalid::{Invalid, Valid};
use super::time::Micros;

/// A validated schedule as stored: the expression and zone exactly as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub expression: String,
    pub timezone: String,
}

/// How fast a schedule's slots come: by the minute, or (a test speed-up the binary turns on
/// for `MAST_TEST_CRON_SECONDS=1`) with the minute field read as seconds, so `*/2 * * * *`
/// fires every two seconds and a test sees several firings without waiting minutes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pace {
    /// Standard cron: the first field is minutes. Always, outside tests.
    #[default]
    Minutes,
    /// The first field is read as seconds; never for production.
    SecondsForTests,
}

/// Field names and ranges of a 5-field expression, for messages.
const FIELDS: [(&str, u32, u32); 5] = [
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
];

/// Reads `schedule` (`{"type":"cron","expression","timezone"}`); `null` is no schedule.
pub fn parse(v: &Value) -> Valid<Option<Schedule>> {
    if v.is_null() {
        return Ok(None);
    }
    tag("schedule", v, &["cron"])?;
    let o = Obj::new(
        "schedule",
        v,
        "a cron schedule",
        &["type", "expression", "timezone"],
    )?;
    let expression = o.req_str("expression")?.trim().to_string();
    let timezone = o.req_str("timezone")?.to_string();
    let s = Schedule {
        expression,
        timezone,
    };
    s.check()?;
    Ok(Some(s))
}

impl Schedule {
    /// Checks the expression's grammar and ranges and the zone's name.
    pub fn check(&self) -> Valid<()> {
        check_grammar(&self.expression)?;
        self.cron(Pace::Minutes)?;
        self.zone()?;
        Ok(())
    }

    fn zone(&self) -> Valid<TimeZone> {
        // jiff also takes POSIX TZ strings and offsets; only tz database names are accepted.
        if self.timezone.is_empty() || self.timezone.contains([',', '<']) {
            return Err(bad_zone(&self.timezone));
        }
        TimeZone::get(&self.timezone).map_err(|_| bad_zone(&self.timezone))
    }

    fn cron(&self, pace: Pace) -> Valid<Cron> {
        let (pattern, seconds) = if pace == Pace::SecondsForTests {
            let f: Vec<&str> = self.expression.split_whitespace().collect();
            (
                format!("{} * {}", f[0], f[1..].join(" ")),
                Seconds::Required,
            )
        } else {
            (self.expression.clone(), Seconds::Disallowed)
        };
        CronParser::builder()
            .seconds(seconds)
            .year(Year::Disallowed)
            .build()
            .parse(&pattern)
            .map_err(|e| {
                Invalid::new(format!(
                    "`schedule.expression` `{}` is not a valid cron expression: {e}",
                    self.expression
                ))
            })
    }

    /// The first firing strictly after `t`.
    pub fn next_after(&self, t: Micros, pace: Pace) -> Option<Micros> {
        let (cron, tz) = (self.cron(pace).ok()?, self.zone().ok()?);
        let z = Timestamp::from_microsecond(t).ok()?.to_zoned(tz);
        let next = cron.find_next_occurrence(&z, false).ok()?;
        Some(next.timestamp().as_microsecond())
    }

    /// The last firing at or before `t` (the catch-up rule fires this one slot).
    pub fn latest_at_or_before(&self, t: Micros, pace: Pace) -> Option<Micros> {
        let (cron, tz) = (self.cron(pace).ok()?, self.zone().ok()?);
        let z = Timestamp::from_microsecond(t).ok()?.to_zoned(tz);
        let prev = cron.find_previous_occurrence(&z, true).ok()?;
        Some(prev.timestamp().as_microsecond())
    }

    /// Up to `n` firings after `t`, in order.
    pub fn upcoming(&self, t: Micros, n: usize, pace: Pace) -> Vec<Micros> {
        let mut out = Vec::with_capacity(n);
        let mut at = t;
        while out.len() < n {
            match self.next_after(at, pace) {
                Some(next) => {
                    out.push(next);
                    at = next;
                }
                None => break,
            }
        }
        out
    }
}

fn bad_zone(name: &str) -> Invalid {
    Invalid::new(format!(
        "`schedule.timezone` `{name}` is not an IANA time zone name (e.g. `America/Los_Angeles`, `UTC`)"
    ))
}

/// Five fields of digits, `*`, `,`, `-` and `/` only: no seconds or year, no names, no
/// `L`, `W`, `#`, `?`, no `@` shortcuts — POSIX cron as the upstream API describes it. Numbers
/// must be within each field's range.
fn check_grammar(expr: &str) -> Valid<()> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(Invalid::new(format!(
            "`schedule.expression` must have 5 fields (minute hour day-of-month month day-of-week), got {}: `{expr}`",
            fields.len()
        )));
    }
    for (field, (name, lo, hi)) in fields.iter().zip(FIELDS) {
        if let Some(c) = field
            .chars()
            .find(|c| !(c.is_ascii_digit() || matches!(c, '*' | ',' | '-' | '/')))
        {
            return Err(Invalid::new(format!(
                "`schedule.expression` {name} field `{field}` has `{c}`: only numbers, `*`, `,`, `-` and `/` are allowed (no names, `L`, `W`, `#`, `?` or `@` shortcuts)"
            )));
        }
        for part in field.split(',') {
            let (range, step) = part.split_once('/').unwrap_or((part, ""));
            if part.matches('/').count() > 1 || (part.contains('/') && step.is_empty()) {
                return Err(Invalid::new(format!(
                    "`schedule.expression` {name} field `{field}` has a malformed step"
                )));
            }
            for n in range.split('-').filter(|n| *n != "*") {
                match n.parse::<u32>() {
                    Ok(n) if (lo..=hi).contains(&n) => {}
                    _ => {
                        return Err(Invalid::new(format!(
                            "`schedule.expression` {name} field `{field}`: values must be {lo}-{hi}"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Micros {
        super::super::time::parse(s).unwrap()
    }

    #[test]
    fn accepts_posix_cron_and_rejects_the_rest() {
        for ok in [
            "0 9 * * 1-5",
            "*/15 * * * *",
            "0 0 1,15 * 7",
            "5-10/2 0 * 1-12 0",
        ] {
            let v = json!({"type": "cron", "expression": ok, "timezone": "UTC"});
            assert!(parse(&v).is_ok(), "{ok}");
        }
        for bad in [
            "* * * *",
            "0 0 * * * *",
            "@daily",
            "0 9 * * MON",
            "0 9 L * *",
            "0 9 ? * 1",
            "60 * * * *",
            "0 24 * * *",
            "0 0 0 * *",
            "0 0 * 13 *",
            "0 0 * * 8",
            "*/ * * * *",
        ] {
            let v = json!({"type": "cron", "expression": bad, "timezone": "UTC"});
            assert!(parse(&v).is_err(), "{bad}");
        }
    }

    #[test]
    fn time_zones_are_tz_database_names() {
        for (tz, ok) in [
            ("America/Los_Angeles", true),
            ("UTC", true),
            ("Europe/Nowhere", false),
            ("", false),
            ("EST5EDT,M3.2.0,M11.1.0", false),
        ] {
            let v = json!({"type": "cron", "expression": "0 9 * * *", "timezone": tz});
            assert_eq!(parse(&v).is_ok(), ok, "{tz}");
        }
        let v = json!({"type": "cron", "expression": "0 9 * * *", "timezone": "UTC", "x": 1});
        assert!(parse(&v).is_err());
        assert_eq!(parse(&Value::Null).unwrap(), None);
    }

    #[test]
    fn evaluates_in_the_zone_across_daylight_saving() {
        let s = Schedule {
            expression: "0 9 * * 1-5".into(),
            timezone: "America/Los_Angeles".into(),
        };
        // Friday 2026-03-06 (PST, UTC-8), then Monday 2026-03-09 (PDT, UTC-7).
        assert_eq!(
            s.next_after(at("2026-03-05T18:00:00Z"), Pace::Minutes),
            Some(at("2026-03-06T17:00:00Z"))
        );
        assert_eq!(
            s.next_after(at("2026-03-06T17:00:00Z"), Pace::Minutes),
            Some(at("2026-03-09T16:00:00Z"))
        );
        assert_eq!(
            s.latest_at_or_before(at("2026-03-09T16:00:00Z"), Pace::Minutes),
            Some(at("2026-03-09T16:00:00Z"))
        );
        assert_eq!(
            s.upcoming(at("2026-03-05T18:00:00Z"), 3, Pace::Minutes)
                .len(),
            3
        );
        // 7 is Sunday as 0 is.
        let sun = Schedule {
            expression: "0 0 * * 7".into(),
            timezone: "UTC".into(),
        };
        assert_eq!(
            sun.next_after(at("2026-03-05T00:00:00Z"), Pace::Minutes),
            Some(at("2026-03-08T00:00:00Z"))
        );
    }
}
