//! What `MAST_LOG` may say. `tracing`'s filter syntax reads a bare word as a target to log at
//! every level, so a level it does not know (`verbose`, `warning`) would be taken as a target
//! and silence every line; a bare word here must be a level or one of Mast's own targets.

/// The levels a bare directive may name.
const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

/// Checks a `MAST_LOG` filter: every comma-separated directive is a level, `target=level`,
/// or a Mast target (`mast`, `mast_engine::…`) to log at every level. Says what is wrong
/// otherwise.
pub fn check_filter(filter: &str) -> Result<(), String> {
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if directive.contains('=') || directive.contains('[') {
            continue;
        }
        let word = directive.to_ascii_lowercase();
        if LEVELS.contains(&word.as_str())
            || word == "mast"
            || word.starts_with("mast_")
            || word.starts_with("mast::")
        {
            continue;
        }
        return Err(format!(
            "`{directive}` is not a log level (one of {}) nor `target=level`",
            LEVELS.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_filter;

    #[test]
    fn levels_targets_and_mast_crates_pass() {
        for ok in [
            "info",
            "DEBUG",
            "warn,mast=debug",
            "mast_engine",
            "info, sqlx=warn",
            "mast::cli",
            "[span]=debug",
            "",
        ] {
            assert!(check_filter(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_word_that_is_no_level_is_refused() {
        for bad in ["verbose", "warning", "info,loud"] {
            let e = check_filter(bad).unwrap_err();
            assert!(e.contains("is not a log level"), "{bad}: {e}");
        }
    }
}
