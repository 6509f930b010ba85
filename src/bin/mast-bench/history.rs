//! `history`: does a session's length cost anything? One session runs plain turns up to
//! position `depth`; the p50 of `window` turns from position 10 is compared with the p50 of
//! `window` turns from position `depth`, and likewise for custom-tool round trips.

use crate::api::{Agent, Api, pct, row};

/// Runs the scenario with an agent of `kind` and prints its rows.
pub async fn run(api: &Api, kind: Agent, depth: usize, window: usize) {
    let (agent, env) = api.setup(kind).await;
    let label = match kind {
        Agent::Plain => "history",
        Agent::Realistic => "realistic agent history",
    };
    let sid = api.session(&agent, &env).await;
    let mut rx = api.stream(&sid).await;
    let mut n = 0;
    let (mut early, mut late) = (Vec::new(), Vec::new());
    let (mut early_tool, mut late_tool) = (Vec::new(), Vec::new());
    // Position counts turns (a tool round trip is one turn).
    let mut position = 0;
    while position < depth + window {
        let measure_early = (10..10 + window).contains(&position);
        let measure_late = position >= depth;
        let ms = api.plain_turn(&sid, &mut rx, &mut n).await;
        position += 1;
        if measure_early {
            early.push(ms);
        } else if measure_late {
            late.push(ms);
        }
        // Around both windows, tool round trips too.
        if measure_early || measure_late {
            let ms = api.tool_round_trip(&sid, &mut rx, &mut n).await;
            position += 1;
            if measure_early {
                early_tool.push(ms);
            } else {
                late_tool.push(ms);
            }
        }
    }
    let (e, l) = (pct(&mut early, 0.5), pct(&mut late, 0.5));
    row(
        &format!(
            "{label}: plain turn at position ~{depth} vs ~10 of one session (p50 of {} and {})",
            late.len(),
            early.len()
        ),
        format!("{l:.2} ms vs {e:.2} ms: {:.2}×", l / e),
        "≤ 1.5×",
    );
    let (e, l) = (pct(&mut early_tool, 0.5), pct(&mut late_tool, 0.5));
    row(
        &format!(
            "{label}: custom-tool round trip at position ~{depth} vs ~10 (p50 of {} and {})",
            late_tool.len(),
            early_tool.len()
        ),
        format!("{l:.2} ms vs {e:.2} ms: {:.2}×", l / e),
        "≤ 1.5×",
    );
}
