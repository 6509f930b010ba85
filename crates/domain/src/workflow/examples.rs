//! Plans and a session setting shared by the tests of several files: the schema test checks
//! that every plan `check` accepts here also fits the schema.

use serde_json::{Value, json};

use super::roster::{ListedAgent, RosterEntry, Workflows};

/// The session's own agent.
pub const LEAD: ListedAgent = ListedAgent {
    id: "agent_lead",
    name: "Lead",
};

/// The session's predefined workflow agents: two others and `self`.
pub const ROSTER: [RosterEntry; 3] = [
    RosterEntry::Agent(ListedAgent {
        id: "agent_plan",
        name: "Planner",
    }),
    RosterEntry::Agent(ListedAgent {
        id: "agent_res",
        name: "Researcher",
    }),
    RosterEntry::SessionAgent,
];

/// The setting most tests check against: the roster above, inline agents allowed.
pub fn workflows() -> Workflows<'static> {
    Workflows {
        predefined_agents: &ROSTER,
        session_agent: LEAD,
        inline_agents: true,
    }
}

/// A plan using every step kind, both agent kinds and every condition: plan, fan out over
/// a split list, revise until a review passes, then branch.
pub fn full_plan() -> Value {
    json!({
        "name": "Tides report",
        "description": "Research the sub-topics of a question and write a reviewed report",
        "lifetime_seconds": 100_000,
        "agents": {
            "planner": {"predefined": "Planner"},
            "researcher": {"predefined": "agent_res"},
            "lead": {"predefined": "Lead"},
            "writer": {"system": "You write concise reports."},
            "reviewer": {
                "name": "Strict reviewer",
                "description": "Says APPROVED or what to fix",
                "system": "You review drafts. Answer APPROVED when a draft is good."
            }
        },
        "inputs": {"question": "How do tides work?", "angles": ["physics", "history"]},
        "phases": [
            {"name": "Plan", "steps": [
                {"agent": {"use": "planner", "prompt": "List sub-topics of {{question}}, one per line, covering {{angles}}.", "save": "plan"}},
                {"split": {"var": "topics", "text": "{{plan}}", "by": "lines"}}
            ]},
            {"name": "Research", "description": "One agent per topic", "steps": [
                {"map": {"over": "topics", "as": "topic", "use": "researcher",
                         "prompt": "Research {{topic}} (item {{index}} of {{topics.count}}) for: {{question}}",
                         "save": "notes", "on_error": "continue", "max_parallel": 100}},
                {"map": {"over": ["sources", "open questions"], "as": "aspect", "use": "lead",
                         "prompt": "List the {{aspect}} of these notes:\n{{notes}}", "save": "extras", "max_parallel": 2}}
            ]},
            {"name": "Write", "steps": [
                {"set": {"var": "review", "value": ""}},
                {"repeat": {"max_rounds": 3, "steps": [
                    {"agent": {"use": "writer", "prompt": "Round {{round}}. Notes:\n{{notes}}\nReview so far: {{review}}", "save": "draft"}},
                    {"agent": {"use": "reviewer", "prompt": "Review:\n{{draft}}", "save": "review", "on_error": "fail"}}
                ], "until": {"any": [
                    {"contains": {"text": "{{review}}", "value": "APPROVED"}},
                    {"equals": {"text": "{{round}}", "value": "3"}}
                ]}}},
                {"if": {
                    "when": {"all": [{"failed": "notes"}, {"not": {"empty": "draft"}}]},
                    "then": [{"set": {"var": "summary", "value": "{{notes.failed}} of {{notes.count}} topics failed; first note: {{notes.1}}"}}],
                    "else": [{"set": {"var": "summary", "value": "all {{notes.count}} topics researched"}}]
                }}
            ]}
        ],
        "result": "{{draft}}\n\n{{summary}}"
    })
}

/// The smallest plan `check` accepts.
pub fn minimal_plan() -> Value {
    json!({"agents": {}, "phases": []})
}

/// A plan of one inline agent step, for tests that change one member.
pub fn one_step_plan() -> Value {
    json!({
        "agents": {"a": {"system": "s"}},
        "phases": [{"name": "p", "steps": [{"agent": {"use": "a", "prompt": "hi", "save": "out"}}]}]
    })
}

/// Plans `check` accepts, for tests that go over many.
pub fn accepted_plans() -> Vec<Value> {
    vec![
        full_plan(),
        minimal_plan(),
        one_step_plan(),
        json!({
            "name": "   ",
            "description": null,
            "agents": {"w": {"predefined": "agent_plan"}},
            "inputs": {"items": ["a", "b"], "x": "y"},
            "phases": [{"name": "only", "description": null, "steps": [
                {"map": {"over": "items", "as": "it", "use": "w", "prompt": "{{it}}"}},
                {"split": {"var": "parts", "text": "[\"a\", 1]", "by": "json"}},
                {"if": {"when": {"empty": "parts"}, "then": []}},
                {"repeat": {"max_rounds": 1, "steps": []}}
            ]}]
        }),
    ]
}
