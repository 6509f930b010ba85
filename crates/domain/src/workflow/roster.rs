//! Which agents a plan may use: the session's predefined workflow agents, named by id or by a
//! name unique among them, and inline agents when the session allows them.

use std::collections::BTreeSet;

use super::error::{PlanError, PlanResult};

/// An agent as a plan may name it: its id and its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedAgent<'a> {
    /// The agent's id.
    pub id: &'a str,
    /// The agent's name.
    pub name: &'a str,
}

/// One entry of the session's `workflows.predefined_agents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosterEntry<'a> {
    /// Another agent.
    Agent(ListedAgent<'a>),
    /// A `self` entry: the session's own agent.
    SessionAgent,
}

/// What the session's workflow setting lets a plan's agents be.
#[derive(Debug, Clone, Copy)]
pub struct Workflows<'a> {
    /// The session's predefined workflow agents, in order.
    pub predefined_agents: &'a [RosterEntry<'a>],
    /// The session's own agent, which a `self` entry stands for.
    pub session_agent: ListedAgent<'a>,
    /// Whether the plan may define agents of its own.
    pub inline_agents: bool,
}

impl<'a> Workflows<'a> {
    fn listed(&self) -> impl Iterator<Item = ListedAgent<'a>> + '_ {
        self.predefined_agents.iter().map(|e| match e {
            RosterEntry::Agent(a) => *a,
            RosterEntry::SessionAgent => self.session_agent,
        })
    }

    /// The id of the one listed agent `reference` names: an id first, else a name that
    /// exactly one listed agent has. `at` is where the plan names it.
    pub fn resolve(&self, at: &str, reference: &str) -> PlanResult<String> {
        if let Some(a) = self.listed().find(|a| a.id == reference) {
            return Ok(a.id.to_string());
        }
        // The same agent listed twice (by id and as `self`) is still one agent.
        let by_name: BTreeSet<&str> = self
            .listed()
            .filter(|a| a.name == reference)
            .map(|a| a.id)
            .collect();
        let mut ids = by_name.iter();
        match (ids.next(), ids.next()) {
            (Some(id), None) => Ok(id.to_string()),
            (Some(_), Some(_)) => Err(PlanError::program(
                at,
                format!(
                    "`{at}` names `{reference}`, which is the name of {} predefined workflow agents ({}); name one by its id",
                    by_name.len(),
                    by_name.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            )),
            (None, _) if self.predefined_agents.is_empty() => Err(PlanError::program(
                at,
                format!(
                    "`{at}` names `{reference}`, but this session has no predefined workflow agents"
                ),
            )),
            (None, _) => Err(PlanError::program(
                at,
                format!(
                    "`{at}` names `{reference}`, which is neither the id nor the name of a predefined workflow agent of this session (listed: {})",
                    self.roll()
                ),
            )),
        }
    }

    /// The listed agents, for messages: `name` (id), ….
    fn roll(&self) -> String {
        self.listed()
            .map(|a| format!("`{}` ({})", a.name, a.id))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Refuses an inline agent defined at `at` when the session does not allow them.
    pub fn allow_inline(&self, at: &str) -> PlanResult<()> {
        if self.inline_agents {
            return Ok(());
        }
        let instead = if self.predefined_agents.is_empty() {
            String::new()
        } else {
            format!(
                "; use {{\"predefined\": id or name}} with one of: {}",
                self.roll()
            )
        };
        Err(PlanError::program(
            at,
            format!(
                "`{at}` defines an inline agent, but inline agents are disabled for this session{instead}"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: ListedAgent = ListedAgent {
        id: "agent_me",
        name: "Lead",
    };

    fn entries() -> Vec<RosterEntry<'static>> {
        vec![
            RosterEntry::Agent(ListedAgent {
                id: "agent_a",
                name: "Writer",
            }),
            RosterEntry::Agent(ListedAgent {
                id: "agent_b",
                name: "Writer",
            }),
            RosterEntry::Agent(ListedAgent {
                id: "agent_c",
                name: "Reviewer",
            }),
            RosterEntry::SessionAgent,
        ]
    }

    #[test]
    fn references_resolve_to_one_listed_agent_or_fail() {
        let entries = entries();
        let w = Workflows {
            predefined_agents: &entries,
            session_agent: ME,
            inline_agents: true,
        };
        let ok = [
            ("agent_a", "agent_a"),
            ("agent_b", "agent_b"),
            ("Reviewer", "agent_c"),
            ("Lead", "agent_me"),
            ("agent_me", "agent_me"),
        ];
        for (reference, id) in ok {
            assert_eq!(w.resolve("agents.x.predefined", reference).unwrap(), id);
        }
        let refused = [
            (
                "Writer",
                "is the name of 2 predefined workflow agents (agent_a, agent_b)",
            ),
            ("writer", "is neither the id nor the name"),
            (
                "agent_z",
                "listed: `Writer` (agent_a), `Writer` (agent_b), `Reviewer` (agent_c), `Lead` (agent_me)",
            ),
        ];
        for (reference, why) in refused {
            let e = w.resolve("agents.x.predefined", reference).unwrap_err();
            assert_eq!(e.path, "agents.x.predefined");
            assert!(
                e.message()
                    .starts_with(&format!("`agents.x.predefined` names `{reference}`")),
                "{}",
                e.message()
            );
            assert!(e.message().contains(why), "{}", e.message());
        }
    }

    #[test]
    fn an_agent_listed_twice_is_not_ambiguous() {
        let entries = [RosterEntry::SessionAgent, RosterEntry::Agent(ME)];
        let w = Workflows {
            predefined_agents: &entries,
            session_agent: ME,
            inline_agents: false,
        };
        assert_eq!(w.resolve("p", "Lead").unwrap(), "agent_me");
    }

    #[test]
    fn an_empty_list_says_so() {
        let w = Workflows {
            predefined_agents: &[],
            session_agent: ME,
            inline_agents: true,
        };
        let e = w.resolve("agents.x.predefined", "Lead").unwrap_err();
        assert!(
            e.message().contains("has no predefined workflow agents"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn inline_agents_follow_the_setting() {
        let entries = entries();
        let mut w = Workflows {
            predefined_agents: &entries,
            session_agent: ME,
            inline_agents: true,
        };
        w.allow_inline("agents.x").unwrap();
        w.inline_agents = false;
        let e = w.allow_inline("agents.x").unwrap_err();
        assert_eq!(e.path, "agents.x");
        assert!(
            e.message().contains("inline agents are disabled"),
            "{}",
            e.message()
        );
        assert!(
            e.message().contains("`Reviewer` (agent_c)"),
            "{}",
            e.message()
        );
    }
}
