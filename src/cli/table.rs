//! The tables the list commands print: a header and aligned columns, two spaces apart, no
//! trailing blanks, so they read in a terminal and still split on whitespace in a pipe.

/// `rows` under `header`, each column as wide as its widest cell.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| (*h).to_string()).collect();
    let mut widths = vec![0usize; header.len()];
    for row in std::iter::once(&header).chain(rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let line = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// An API time (RFC 3339) to the second, for a table: `2026-12-07 06:10:02Z`.
pub fn short_time(t: &str) -> String {
    let secs = t
        .split_once('.')
        .map_or(t.trim_end_matches('Z'), |(s, _)| s);
    format!("{}Z", secs.replace('T', " "))
}

/// A cell that holds free text: on one line, cut to `max` characters, `-` when empty.
pub fn cell(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "-".into();
    }
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_cells_stay_on_one_line() {
        let rows = vec![
            vec!["a".to_string(), "longer".to_string(), String::new()],
            vec!["bbb".to_string(), "x".to_string(), "end".to_string()],
        ];
        assert_eq!(
            render(&["ID", "NAME", "LAST"], &rows),
            "ID   NAME    LAST\na    longer\nbbb  x       end\n"
        );
        assert_eq!(
            short_time("2026-12-07T06:10:02.123456Z"),
            "2026-12-07 06:10:02Z"
        );
        assert_eq!(short_time("2026-12-07T06:10:02Z"), "2026-12-07 06:10:02Z");
        assert_eq!(cell("two\nlines", 20), "two lines");
        assert_eq!(cell("", 20), "-");
        assert_eq!(cell("abcdef", 4), "abc…");
    }
}
