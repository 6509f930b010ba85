//! Whole runs, driven as the engine drives them: the actions each transition returns, in
//! order, and what the run ends with.

use serde_json::{Value, json};

use super::super::examples::full_plan;
use super::super::limits::Limits;
use super::driver::{Driver, Started, completed, id, say, start};
use super::{Action, Counts, RunEnd, RunErrorKind};

fn ps(phase: usize) -> Action {
    Action::PhaseStarted { phase }
}

fn pe(phase: usize) -> Action {
    Action::PhaseEnded { phase }
}

/// The error end a run's last action holds.
fn error_end(actions: &[Action]) -> (RunErrorKind, String, String) {
    match actions.last() {
        Some(Action::Ended(RunEnd::Error {
            kind,
            message,
            detail,
        })) => (*kind, message.clone(), detail.clone()),
        other => panic!("not an error end: {other:?}"),
    }
}

/// Reads `documents` in parallel, then merges what was read.
fn canonical() -> Value {
    json!({
        "agents": {"reader": {"system": "You read documents."}},
        "phases": [
            {"name": "P1", "steps": [{"map": {"over": ["a.md", "b.md", "c.md"], "as": "doc",
                "use": "reader", "prompt": "say Read {{doc}}.", "save": "notes"}}]},
            {"name": "P2", "steps": [{"agent": {"use": "reader",
                "prompt": "say Merged {{notes.count}}.", "save": "merged"}}]}
        ],
        "result": "{{merged}}"
    })
}

#[test]
fn the_canonical_plan_runs_phase_by_phase() {
    let mut d = Driver::new(canonical());
    assert_eq!(
        d.advance(),
        [
            ps(0),
            start(1, "reader", "say Read a.md.", Some(0)),
            start(2, "reader", "say Read b.md.", Some(1)),
            start(3, "reader", "say Read c.md.", Some(2)),
        ]
    );
    assert_eq!(d.advance(), [], "waiting changes nothing");
    assert_eq!(d.state.open_phase(), Some(0));
    assert_eq!(d.answer(&id(1), "Read a.md."), []);
    assert_eq!(d.answer(&id(3), "Read c.md."), []);
    assert_eq!(
        d.answer(&id(2), "Read b.md."),
        [pe(0), ps(1), start(4, "reader", "say Merged 3.", None)]
    );
    assert_eq!((d.state.open_phase(), d.state.phases_ended()), (Some(1), 1));
    assert_eq!(
        d.answer(&id(4), "Merged 3."),
        [pe(1), completed("Merged 3.")]
    );
    assert!(d.state.is_ended());
    assert_eq!((d.state.open_phase(), d.state.phases_ended()), (None, 2));
    assert_eq!(
        d.state.counts(),
        Counts {
            started: 4,
            working: 0,
            returned: 4,
            failed: 0
        }
    );
    assert_eq!(d.advance(), [], "an ended run does nothing");

    let mut d = Driver::new(canonical());
    assert_eq!(
        d.run(say),
        RunEnd::Completed {
            result: "Merged 3.".into()
        }
    );
}

#[test]
fn a_map_keeps_at_most_max_parallel_working_and_saves_in_item_order() {
    let mut d = Driver::new(json!({
        "agents": {"r": {"system": "s"}},
        "inputs": {"docs": ["a", "b", "c", "d", "e"]},
        "phases": [{"name": "p", "steps": [{"map": {"over": "docs", "as": "doc", "use": "r",
            "prompt": "say {{index}}:{{doc}}", "save": "notes", "max_parallel": 2}}]}],
        "result": "{{notes}}"
    }));
    assert_eq!(
        d.advance(),
        [
            ps(0),
            start(1, "r", "say 1:a", Some(0)),
            start(2, "r", "say 2:b", Some(1))
        ]
    );
    assert_eq!(d.answer(&id(2), "B"), [start(3, "r", "say 3:c", Some(2))]);
    assert_eq!(d.answer(&id(3), "C"), [start(4, "r", "say 4:d", Some(3))]);
    assert_eq!(d.answer(&id(1), "A"), [start(5, "r", "say 5:e", Some(4))]);
    assert_eq!(d.answer(&id(5), "E"), []);
    assert_eq!(
        d.answer(&id(4), "D"),
        [
            pe(0),
            completed("[1] A\n\n[2] B\n\n[3] C\n\n[4] D\n\n[5] E")
        ]
    );
    assert_eq!(d.most_working, 2);
}

#[test]
fn two_hundred_agents_run_at_most_sixty_four_at_once() {
    let docs: Vec<String> = (1..=200).map(|i| format!("doc{i}")).collect();
    let mut d = Driver::new(json!({
        "agents": {"r": {"system": "s"}},
        "inputs": {"docs": docs},
        "phases": [{"name": "p", "steps": [{"map": {"over": "docs", "as": "doc", "use": "r",
            "prompt": "say {{doc}} #{{index}}", "save": "notes"}}]}],
        "result": "{{notes.count}} {{notes.failed}} {{notes.1}} {{notes.200}}"
    }));
    // A fixed, scrambled order of answers.
    let mut seed = 7u64;
    let end = d.run_with(
        |working| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % working.len()
        },
        say,
    );
    assert_eq!(
        end,
        RunEnd::Completed {
            result: "200 0 doc1 #1 doc200 #200".into()
        }
    );
    assert_eq!(d.most_working, 64);
    let items: Vec<usize> = d
        .log
        .iter()
        .filter_map(|a| match a {
            Action::StartAgent { item, .. } => *item,
            _ => None,
        })
        .collect();
    assert_eq!(items, (0..200).collect::<Vec<_>>(), "items start in order");
    assert_eq!(d.state.counts().returned, 200);
}

fn review_loop(max_rounds: u64) -> Value {
    json!({
        "agents": {"writer": {"system": "w"}, "reviewer": {"system": "r"}},
        "inputs": {"topic": "tides"},
        "phases": [{"name": "Write", "steps": [
            {"set": {"var": "review", "value": "none yet"}},
            {"repeat": {"max_rounds": max_rounds, "steps": [
                {"agent": {"use": "writer", "prompt": "Draft {{round}} on {{topic}}; last review: {{review}}", "save": "draft"}},
                {"agent": {"use": "reviewer", "prompt": "Review {{draft}}", "save": "review"}}
            ], "until": {"contains": {"text": "{{review}}", "value": "APPROVED"}}}}
        ]}],
        "result": "{{draft}} ({{review}})"
    })
}

/// The writer writes `draft N` in round N; the reviewer approves `approve`.
fn writer_and_reviewer(approve: &'static str) -> impl FnMut(&Started) -> Option<String> {
    move |a: &Started| {
        Some(match a.agent_key.as_str() {
            "writer" => {
                let round = a.prompt.split(' ').nth(1).unwrap();
                format!("draft {round}")
            }
            _ if a.prompt == format!("Review {approve}") => "APPROVED".to_string(),
            _ => "fix it".to_string(),
        })
    }
}

#[test]
fn a_repeat_stops_after_the_round_whose_until_holds() {
    let mut d = Driver::new(review_loop(4));
    let end = d.run(writer_and_reviewer("draft 2"));
    assert_eq!(
        end,
        RunEnd::Completed {
            result: "draft 2 (APPROVED)".into()
        }
    );
    let prompts: Vec<&str> = d
        .log
        .iter()
        .filter_map(|a| match a {
            Action::StartAgent { prompt, .. } => Some(prompt.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        prompts,
        [
            "Draft 1 on tides; last review: none yet",
            "Review draft 1",
            "Draft 2 on tides; last review: fix it",
            "Review draft 2",
        ]
    );
    assert_eq!(d.log.first(), Some(&ps(0)));
    assert_eq!(d.log[d.log.len() - 2], pe(0));
}

#[test]
fn a_repeat_runs_at_most_max_rounds() {
    for (max_rounds, approve, agents, result) in [
        (3, "never", 6, "draft 3 (fix it)"),
        (1, "never", 2, "draft 1 (fix it)"),
        (3, "draft 3", 6, "draft 3 (APPROVED)"),
        (3, "draft 1", 2, "draft 1 (APPROVED)"),
    ] {
        let mut d = Driver::new(review_loop(max_rounds));
        let end = d.run(writer_and_reviewer(approve));
        assert_eq!(
            end,
            RunEnd::Completed {
                result: result.into()
            },
            "{max_rounds} {approve}"
        );
        assert_eq!(d.state.counts().started, agents, "{max_rounds} {approve}");
    }
}

#[test]
fn a_map_in_a_repeat_sees_its_index_and_the_round() {
    let mut d = Driver::new(json!({
        "agents": {"r": {"system": "s"}},
        "phases": [{"name": "p", "steps": [{"repeat": {"max_rounds": 2, "steps": [
            {"map": {"over": ["x", "y"], "as": "it", "use": "r", "prompt": "say {{round}}.{{index}}={{it}}", "save": "out"}}
        ]}}]}],
        "result": "{{out}}"
    }));
    assert_eq!(
        d.run(say),
        RunEnd::Completed {
            result: "[1] 2.1=x\n\n[2] 2.2=y".into()
        }
    );
    let prompts: Vec<String> = d
        .log
        .iter()
        .filter_map(|a| match a {
            Action::StartAgent { prompt, item, .. } => Some(format!("{prompt} {item:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        prompts,
        [
            "say 1.1=x Some(0)",
            "say 1.2=y Some(1)",
            "say 2.1=x Some(0)",
            "say 2.2=y Some(1)"
        ]
    );
}

#[test]
fn an_if_runs_one_branch() {
    let plan = |answer: &str| {
        json!({
            "agents": {"a": {"system": "s"}},
            "inputs": {"q": answer},
            "phases": [{"name": "p", "steps": [
                {"agent": {"use": "a", "prompt": "say {{q}}", "save": "answer"}},
                {"if": {"when": {"equals": {"text": "{{answer}}", "value": "yes"}},
                    "then": [{"set": {"var": "out", "value": "took then"}},
                             {"agent": {"use": "a", "prompt": "say then agent", "save": "extra"}}],
                    "else": [{"set": {"var": "out", "value": "took else"}}]}},
                {"if": {"when": {"empty": "extra"}, "then": [{"set": {"var": "none", "value": "no extra"}}]}}
            ]}],
            "result": "{{out}}|{{extra}}|{{none}}"
        })
    };
    for (answer, result, agents) in [
        ("yes", "took then|then agent|", 2),
        ("no", "took else||no extra", 1),
    ] {
        let mut d = Driver::new(plan(answer));
        assert_eq!(
            d.run(say),
            RunEnd::Completed {
                result: result.into()
            },
            "{answer}"
        );
        assert_eq!(d.state.counts().started, agents);
    }
}

#[test]
fn split_makes_lists_a_map_can_run_over() {
    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "phases": [{"name": "Plan", "steps": [
            {"agent": {"use": "a", "prompt": "list topics", "save": "plan"}},
            {"split": {"var": "topics", "text": "{{plan}}", "by": "lines"}},
            {"map": {"over": "topics", "as": "t", "use": "a", "prompt": "say on {{t}}", "save": "notes"}},
            {"set": {"var": "summary", "value": "{{topics.count}} topics: {{notes.2}}"}},
            {"split": {"var": "nums", "text": "```json\n[1, \"two\", {{topics.count}}]\n```", "by": "json"}}
        ]}],
        "result": "{{summary}} / {{nums.2}} / {{nums}}"
    }));
    let end = d.run(|a| match a.prompt.as_str() {
        "list topics" => Some("  physics \n\n history\n".into()),
        _ => say(a),
    });
    assert_eq!(
        end,
        RunEnd::Completed {
            result: "2 topics: on history / two / [1] 1\n\n[2] two\n\n[3] 2".into()
        }
    );
}

#[test]
fn a_split_of_anything_but_a_json_list_ends_the_run_after_closing_the_phase() {
    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "phases": [
            {"name": "p", "steps": [
                {"agent": {"use": "a", "prompt": "list", "save": "plan"}},
                {"split": {"var": "topics", "text": "{{plan}}", "by": "json"}},
                {"set": {"var": "never", "value": "x"}}
            ]},
            {"name": "never", "steps": []}
        ]
    }));
    assert_eq!(d.advance(), [ps(0), start(1, "a", "list", None)]);
    let actions = d.answer(&id(1), "Sure! Here: secret [1, 2");
    assert_eq!(actions[0], pe(0));
    assert_eq!(actions.len(), 2);
    let (kind, message, detail) = error_end(&actions);
    assert_eq!(kind, RunErrorKind::ProgramError);
    assert_eq!(message, "a split step's text is not a JSON list");
    assert_eq!(
        detail,
        "`phases[0].steps[1].split`: split by json: the text is not valid JSON (line 1, column 1)"
    );
    assert!(d.state.is_ended());
    assert_eq!(d.state.phases_ended(), 1);
}

#[test]
fn on_error_continue_records_the_failure() {
    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "phases": [{"name": "p", "steps": [
            {"map": {"over": ["A", "B", "C"], "as": "x", "use": "a", "prompt": "say {{x}}", "save": "notes", "on_error": "continue"}},
            {"agent": {"use": "a", "prompt": "say solo", "save": "solo", "on_error": "continue"}},
            {"if": {"when": {"all": [{"failed": "solo"}, {"failed": "notes"}, {"empty": "solo"}]},
                "then": [{"set": {"var": "verdict", "value": "both failed"}}]}},
            {"map": {"over": "notes", "as": "n", "use": "a", "prompt": "say again {{n}}", "save": "again", "on_error": "continue"}}
        ]}],
        "result": "{{notes.failed}}/{{notes.count}} {{notes}} | {{solo.failed}} [{{solo}}] | {{verdict}} | {{again}}"
    }));
    let end = d.run(|a| match a.prompt.as_str() {
        "say B" | "say solo" => None,
        _ => say(a),
    });
    assert_eq!(
        end,
        RunEnd::Completed {
            result: "1/3 [1] A\n\n[2] (failed)\n\n[3] C | 1 [] | both failed | [1] again A\n\n[2] again \n\n[3] again C"
                .into()
        }
    );
    assert_eq!(
        d.state.counts(),
        Counts {
            started: 7,
            working: 0,
            returned: 5,
            failed: 2
        }
    );
}

#[test]
fn on_error_fail_ends_the_run_at_the_first_failure() {
    let mut d = Driver::new(json!({
        "agents": {"reader": {"system": "s"}},
        "phases": [{"name": "p", "steps": [
            {"map": {"over": ["a", "b", "c"], "as": "x", "use": "reader", "prompt": "say {{x}}", "save": "notes"}}
        ]}, {"name": "q", "steps": []}]
    }));
    assert_eq!(d.advance().len(), 4);
    let actions = d.fail(&id(2));
    assert_eq!(actions[0], pe(0));
    let (kind, message, detail) = error_end(&actions);
    assert_eq!(
        (kind, message.as_str()),
        (RunErrorKind::ProgramError, "an agent failed")
    );
    assert_eq!(
        detail,
        "`phases[0].steps[0].map`: the agent `reader` of item 2 (thread sthr_2) failed, and the step's on_error is fail"
    );
    // The engine stops the others; their outcomes no longer count.
    assert_eq!(d.state.working_threads(), [id(1), id(3)]);
    assert!(!d.state.agent_returned(&id(1)));
    assert_eq!(d.advance(), []);
    assert_eq!(d.state.counts().failed, 1);

    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "phases": [{"name": "p", "steps": [{"repeat": {"max_rounds": 2, "steps": [
            {"agent": {"use": "a", "prompt": "say x"}}]}}]}]
    }));
    let end = d.run(|a| (a.thread_id != id(2)).then(|| "x".into()));
    let RunEnd::Error { kind, detail, .. } = end else {
        panic!("{end:?}")
    };
    assert_eq!(kind, RunErrorKind::ProgramError);
    assert_eq!(
        detail,
        "`phases[0].steps[0].repeat.steps[0].agent`: the agent `a` (thread sthr_2) failed, and the step's on_error is fail"
    );
}

#[test]
fn a_step_that_would_pass_the_agent_limit_starts_none() {
    let limits = Limits {
        max_agents_per_run: 4,
        ..Limits::default()
    };
    let mut d = Driver::with_limits(
        json!({
            "agents": {"a": {"system": "s"}},
            "phases": [
                {"name": "p", "steps": [
                    {"map": {"over": ["1", "2", "3"], "as": "x", "use": "a", "prompt": "say {{x}}"}},
                    {"agent": {"use": "a", "prompt": "say fourth"}}
                ]},
                {"name": "q", "steps": [
                    {"map": {"over": ["5", "6"], "as": "x", "use": "a", "prompt": "say {{x}}"}}
                ]}
            ]
        }),
        limits,
    );
    assert_eq!(d.advance().len(), 4);
    assert!(d.answer(&id(1), "1").is_empty());
    assert!(d.answer(&id(2), "2").is_empty());
    assert_eq!(
        d.answer(&id(3), "3"),
        [start(4, "a", "say fourth", None)],
        "reaching the limit is allowed"
    );
    let actions = d.answer(&id(4), "fourth");
    assert_eq!(actions[..3], [pe(0), ps(1), pe(1)]);
    let (kind, message, detail) = error_end(&actions);
    assert_eq!(kind, RunErrorKind::ThreadLimitError);
    assert_eq!(message, "the run would start more than 4 agents");
    assert_eq!(
        detail,
        "`phases[1].steps[0].map` would start 2 agents after 4 were started; a run may start at most 4"
    );
    assert_eq!(d.state.counts().started, 4);

    let mut d = Driver::with_limits(
        json!({
            "agents": {"a": {"system": "s"}},
            "phases": [{"name": "p", "steps": [
                {"map": {"over": ["1", "2", "3", "4", "5"], "as": "x", "use": "a", "prompt": "say {{x}}"}}
            ]}]
        }),
        Limits {
            max_agents_per_run: 4,
            max_running_threads: 2,
            ..Limits::default()
        },
    );
    let actions = d.advance();
    assert_eq!(actions[..2], [ps(0), pe(0)]);
    assert_eq!(error_end(&actions).0, RunErrorKind::ThreadLimitError);
    assert!(d.state.working_threads().is_empty());
}

#[test]
fn long_prompts_results_and_values_are_cut() {
    let limits = Limits {
        max_text_chars: 10,
        ..Limits::default()
    };
    let mut d = Driver::with_limits(
        json!({
            "agents": {"a": {"system": "s"}},
            "inputs": {"long": "0123456789abcdef"},
            "phases": [{"name": "p", "steps": [
                {"agent": {"use": "a", "prompt": "{{long}}", "save": "out"}},
                {"set": {"var": "twice", "value": "{{long}}{{long}}"}},
                {"map": {"over": ["x"], "as": "i", "use": "a", "prompt": "{{out}}", "save": "again"}}
            ]}],
            "result": "R: {{out}} {{twice}}"
        }),
        limits,
    );
    assert_eq!(
        d.advance(),
        [ps(0), start(1, "a", "0123456789\n[truncated]", None)]
    );
    assert_eq!(
        d.answer(&id(1), "ABCDEFGHIJKLMNOP"),
        [start(2, "a", "ABCDEFGHIJ\n[truncated]", Some(0))],
        "a result is cut where it is read"
    );
    let json = serde_json::to_string(&d.state).unwrap();
    assert!(
        json.contains(r#""twice":{"text":"0123456789\n[truncated]"}"#),
        "{json}"
    );
    assert_eq!(
        d.answer(&id(2), "x"),
        [pe(0), completed("R: ABCDEFG\n[truncated]")]
    );
}

#[test]
fn a_long_text_split_by_json_fails_saying_it_was_cut() {
    let mut d = Driver::with_limits(
        json!({
            "agents": {},
            "inputs": {"list": "[\"a\", \"b\", \"c\"]"},
            "phases": [{"name": "p", "steps": [{"split": {"var": "v", "text": "{{list}}", "by": "json"}}]}]
        }),
        Limits {
            max_text_chars: 8,
            ..Limits::default()
        },
    );
    let (kind, _, detail) = error_end(&d.advance());
    assert_eq!(kind, RunErrorKind::ProgramError);
    assert!(
        detail.ends_with("(its text was cut at 8 characters first)"),
        "{detail}"
    );
}

/// Runs the example plan that uses every kind of step, answering newest first.
fn full_run(roundtrip: bool) -> Driver {
    let mut d = Driver::new(full_plan());
    d.roundtrip = roundtrip;
    let end = d.run_with(
        |working| working.len() - 1,
        |a| match a.agent_key.as_str() {
            "planner" => Some("physics\nhistory\nmyths".into()),
            "researcher" if a.prompt.starts_with("Research myths") => None,
            "researcher" => Some(format!("note {}", a.item.unwrap() + 1)),
            "lead" => Some(format!("lead {}", a.item.unwrap() + 1)),
            "writer" if a.prompt.starts_with("Round 2") => Some("the draft".into()),
            "writer" => Some("a weak draft".into()),
            "reviewer" if a.prompt.contains("the draft") => Some("APPROVED".into()),
            "reviewer" => Some("more sources".into()),
            other => panic!("{other}"),
        },
    );
    assert_eq!(
        end,
        RunEnd::Completed {
            result: "the draft\n\n1 of 3 topics failed; first note: note 1".into()
        }
    );
    d
}

#[test]
fn a_state_read_back_from_json_at_every_point_goes_on_the_same() {
    let straight = full_run(false);
    let reloaded = full_run(true);
    assert_eq!(straight.log, reloaded.log);
    assert_eq!(straight.state, reloaded.state);
    // Every phase of the plan started and ended, in order.
    let phases: Vec<&Action> = straight
        .log
        .iter()
        .filter(|a| matches!(a, Action::PhaseStarted { .. } | Action::PhaseEnded { .. }))
        .collect();
    assert_eq!(phases, [&ps(0), &pe(0), &ps(1), &pe(1), &ps(2), &pe(2)]);
    assert_eq!(straight.state.counts().started, 1 + 3 + 2 + 4);
}

#[test]
fn the_state_never_holds_an_agents_result() {
    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "phases": [{"name": "p", "steps": [
            {"agent": {"use": "a", "prompt": "first", "save": "one"}},
            {"map": {"over": ["x", "y"], "as": "i", "use": "a", "prompt": "{{one}} {{i}}", "save": "many"}},
            {"if": {"when": {"contains": {"text": "{{many}}", "value": "RESULT"}}, "then": [
                {"agent": {"use": "a", "prompt": "{{many.2}}", "save": "last"}}
            ]}}
        ]}]
    }));
    let mut n = 0;
    let end = d.run(|_| {
        n += 1;
        Some(format!("RESULT-TEXT-{n}"))
    });
    let json = serde_json::to_string(&d.state).unwrap();
    assert!(!json.contains("RESULT-TEXT"), "{json}");
    let RunEnd::Completed { result } = end else {
        panic!("{end:?}")
    };
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(
        result,
        json!({"one": "RESULT-TEXT-1", "many": ["RESULT-TEXT-2", "RESULT-TEXT-3"], "last": "RESULT-TEXT-4"})
    );
    let prompts: Vec<&str> = d
        .log
        .iter()
        .filter_map(|a| match a {
            Action::StartAgent { prompt, .. } => Some(prompt.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        prompts,
        [
            "first",
            "RESULT-TEXT-1 x",
            "RESULT-TEXT-1 y",
            "RESULT-TEXT-3"
        ]
    );
}

#[test]
fn stopping_mid_run_closes_the_phase_and_leaves_the_working_threads_to_stop() {
    let mut d = Driver::new(canonical());
    d.advance();
    d.answer(&id(1), "Read a.md.");
    let before = d.state.counts();
    assert_eq!(
        d.state.stop(RunEnd::Stopped),
        [pe(0), Action::Ended(RunEnd::Stopped)]
    );
    assert_eq!(d.state.working_threads(), [id(2), id(3)]);
    assert_eq!(d.state.counts(), before);
    assert!(!d.state.agent_returned(&id(2)));
    assert!(!d.state.agent_failed(&id(3)));
    assert_eq!(d.advance(), []);
    assert_eq!(d.state.stop(RunEnd::Stopped), []);

    let timeout = RunEnd::error(
        RunErrorKind::TimeoutError,
        "the run's lifetime passed",
        "after 600 seconds",
    );
    let mut d = Driver::new(canonical());
    d.advance();
    assert_eq!(
        d.state.stop(timeout.clone()),
        [pe(0), Action::Ended(timeout)]
    );
}

#[test]
fn replayed_and_unknown_outcomes_change_nothing() {
    let mut d = Driver::new(canonical());
    d.advance();
    d.answer(&id(1), "Read a.md.");
    let before = serde_json::to_value(&d.state).unwrap();
    assert!(!d.state.agent_returned(&id(1)));
    assert!(!d.state.agent_failed(&id(1)));
    assert!(!d.state.agent_returned("sthr_404"));
    assert!(!d.state.agent_failed("sthr_404"));
    assert_eq!(d.advance(), []);
    assert_eq!(serde_json::to_value(&d.state).unwrap(), before);
    assert_eq!(d.state.counts().returned, 1);
}

#[test]
fn empty_plans_phases_and_maps_run_without_agents() {
    let mut d = Driver::new(json!({"agents": {}, "phases": []}));
    assert_eq!(d.advance(), [completed("{}")]);

    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "inputs": {"none": []},
        "phases": [
            {"name": "empty", "steps": []},
            {"name": "maps", "steps": [
                {"map": {"over": "none", "as": "x", "use": "a", "prompt": "{{x}}", "save": "out"}},
                {"if": {"when": {"any": []}, "then": [{"set": {"var": "skipped", "value": "s"}}]}},
                {"map": {"over": "skipped", "as": "x", "use": "a", "prompt": "{{x}}", "save": "also"}}
            ]}
        ],
        "result": "{{out.count}} {{also.count}} [{{also}}] {{none.count}}"
    }));
    assert_eq!(
        d.advance(),
        [ps(0), pe(0), ps(1), pe(1), completed("0 0 [] 0")]
    );
    assert_eq!(d.state.counts(), Counts::default());
}

#[test]
fn without_a_result_the_run_returns_every_variable() {
    let mut d = Driver::new(json!({
        "agents": {"a": {"system": "s"}},
        "inputs": {"q": "why"},
        "phases": [{"name": "p", "steps": [
            {"map": {"over": ["x", "y"], "as": "i", "use": "a", "prompt": "say {{i}}", "save": "m", "on_error": "continue"}},
            {"agent": {"use": "a", "prompt": "say one", "save": "one"}}
        ]}]
    }));
    let end = d.run(|a| (a.prompt != "say y").then(|| say(a).unwrap()));
    let RunEnd::Completed { result } = end else {
        panic!("{end:?}")
    };
    assert_eq!(
        serde_json::from_str::<Value>(&result).unwrap(),
        json!({"q": "why", "m": ["x", null], "one": "one"})
    );
}

#[test]
fn a_state_run_against_another_plan_ends_without_starting_anything() {
    let mut d = Driver::new(canonical());
    d.advance();
    let state = d.state.clone();
    for other in [
        json!({"agents": {}, "phases": [{"name": "p", "steps": [{"set": {"var": "v", "value": ""}}]}]}),
        json!({"agents": {}, "phases": []}),
    ] {
        let mut o = Driver::new(other);
        o.state = state.clone();
        let actions = o.advance();
        assert_eq!(actions.len(), 2, "{actions:?}");
        assert_eq!(actions[0], pe(0));
        let (kind, message, detail) = error_end(&actions);
        assert_eq!(kind, RunErrorKind::UnknownError);
        assert_eq!(message, "the run could not continue");
        assert_eq!(
            detail,
            "the run's state (at `phases[0].steps[0]`) does not fit its plan"
        );
    }
}
