//! Multiagent configuration: parsing both request schemas, the update merge
//! rule, and resolution to the agent form (pinned versions) and the session form (snapshots).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::agent::{Agent, SessionAgent};
use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid};

const MAX_ROSTER: usize = 20;

/// Reserved roster name of the advisor thread.
pub const ADVISOR_NAME: &str = "anthropic.advisor";

/// A roster agent that must be looked up in the store (latest version when `version` is None).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RosterRef {
    pub id: String,
    pub version: Option<i64>,
}

#[derive(Debug, Clone)]
enum Entry {
    Agent(RosterRef),
    SelfRef,
    Advisor(String),
}

#[derive(Debug, Clone)]
struct Member {
    enabled: bool,
    inline: bool,
    predefined: Vec<Entry>,
}

#[derive(Debug, Clone)]
enum Plan {
    Coordinator(Vec<Entry>),
    V20261001 {
        advisor: Option<String>,
        subagents: Member,
        workflows: Member,
    },
}

fn entry(at: &str, v: &Value, allow_advisor: bool) -> Valid<Entry> {
    if let Value::String(id) = v
        && !id.is_empty()
    {
        return Ok(Entry::Agent(RosterRef {
            id: id.clone(),
            version: None,
        }));
    }
    if !v.is_object() {
        return Err(must_be(at, "an agent id or an entry object", v));
    }
    let kinds: &[&str] = if allow_advisor {
        &["agent", "self", "advisor"]
    } else {
        &["agent", "self"]
    };
    match tag(at, v, kinds)? {
        "agent" => {
            let o = Obj::new(at, v, "an agent entry", &["type", "id", "version"])?;
            let id = o.req_str("id")?;
            let version = match o.int("version") {
                Ok(Some(n)) if n >= 1 => Some(n),
                Ok(None) => None,
                _ => {
                    return Err(Invalid::new(format!(
                        "`{at}.version` must be an integer >= 1"
                    )));
                }
            };
            Ok(Entry::Agent(RosterRef {
                id: id.to_string(),
                version,
            }))
        }
        "self" => {
            Obj::new(at, v, "a `self` entry", &["type"])?;
            Ok(Entry::SelfRef)
        }
        _ => {
            let o = Obj::new(at, v, "an advisor entry", &["type", "model"])?;
            let model = o.req_str("model")?;
            if model.trim().is_empty() {
                return Err(Invalid::new(format!("`{at}.model` is required")));
            }
            Ok(Entry::Advisor(model.to_string()))
        }
    }
}

fn check_entries(at: &str, entries: &[Entry]) -> Valid<()> {
    if entries.len() > MAX_ROSTER {
        return Err(Invalid::new(format!(
            "`{at}` has {} entries; at most {MAX_ROSTER} are allowed",
            entries.len()
        )));
    }
    let mut ids = BTreeSet::new();
    let (mut selves, mut advisors) = (0, 0);
    for e in entries {
        match e {
            Entry::Agent(r) => {
                if !ids.insert(r.id.clone()) {
                    return Err(Invalid::new(format!(
                        "`{at}` lists agent `{}` more than once",
                        r.id
                    )));
                }
            }
            Entry::SelfRef => selves += 1,
            Entry::Advisor(_) => advisors += 1,
        }
    }
    if selves > 1 {
        return Err(Invalid::new(format!(
            "`{at}` may contain at most one `self` entry"
        )));
    }
    if advisors > 1 {
        return Err(Invalid::new(format!(
            "`{at}` may contain at most one `advisor` entry"
        )));
    }
    Ok(())
}

/// Reads a `subagents` or `workflows` member; absent or `null` gives `default`.
fn member(at: &str, v: Option<&Value>, default: Member) -> Valid<Member> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(default);
    };
    if tag(at, v, &["enabled", "disabled"])? == "disabled" {
        Obj::new(at, v, "a disabled member", &["type"])?;
        return Ok(DISABLED);
    }
    let o = Obj::new(
        at,
        v,
        "an enabled member",
        &["type", "inline_agents", "predefined_agents"],
    )?;
    let inline = match o.get("inline_agents") {
        None => true,
        Some(i) => {
            let iat = o.path("inline_agents");
            let kind = tag(&iat, i, &["enabled", "disabled"])?;
            Obj::new(&iat, i, "an inline agents setting", &["type"])?;
            kind == "enabled"
        }
    };
    let predefined = o
        .list("predefined_agents")?
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| entry(&format!("{at}.predefined_agents[{i}]"), e, false))
        .collect::<Valid<Vec<_>>>()?;
    check_entries(&format!("{at}.predefined_agents"), &predefined)?;
    if !inline && predefined.is_empty() {
        return Err(Invalid::new(format!(
            "`{at}`: with inline agents disabled, `predefined_agents` must not be empty"
        )));
    }
    Ok(Member {
        enabled: true,
        inline,
        predefined,
    })
}

const DISABLED: Member = Member {
    enabled: false,
    inline: false,
    predefined: vec![],
};

/// What an omitted `subagents` means: enabled, inline agents allowed.
const SUBAGENTS_DEFAULT: Member = Member {
    enabled: true,
    inline: true,
    predefined: vec![],
};

/// What an omitted (or `null`) `workflows` means: enabled, inline agents allowed.
const WORKFLOWS_DEFAULT: Member = SUBAGENTS_DEFAULT;

const V2_WHAT: &str = "a `multiagent_20261001` configuration";
const V2_KEYS: [&str; 4] = ["type", "advisor", "subagents", "workflows"];

fn parse(v: &Value) -> Valid<Plan> {
    let at = "multiagent";
    match tag(at, v, &["coordinator", "multiagent_20261001"])? {
        "coordinator" => {
            let o = Obj::new(at, v, "a coordinator roster", &["type", "agents"])?;
            let agents = o.list("agents")?.ok_or_else(|| {
                Invalid::new("`multiagent.agents` must be a list of 1-20 entries")
            })?;
            if agents.is_empty() {
                return Err(Invalid::new(
                    "`multiagent.agents` must list at least one agent",
                ));
            }
            let entries = agents
                .iter()
                .enumerate()
                .map(|(i, e)| entry(&format!("multiagent.agents[{i}]"), e, true))
                .collect::<Valid<Vec<_>>>()?;
            check_entries("multiagent.agents", &entries)?;
            Ok(Plan::Coordinator(entries))
        }
        _ => {
            let o = Obj::new(at, v, V2_WHAT, &V2_KEYS)?;
            let advisor = match o.get("advisor") {
                None => None,
                Some(a) => {
                    let aat = o.path("advisor");
                    if tag(&aat, a, &["enabled", "disabled"])? == "disabled" {
                        Obj::new(&aat, a, "a disabled advisor", &["type"])?;
                        None
                    } else {
                        let a = Obj::new(&aat, a, "an enabled advisor", &["type", "model"])?;
                        let model = a.req_str("model")?;
                        if model.trim().is_empty() {
                            return Err(Invalid::new("`multiagent.advisor.model` is required"));
                        }
                        Some(model.to_string())
                    }
                }
            };
            Ok(Plan::V20261001 {
                advisor,
                subagents: member(
                    "multiagent.subagents",
                    o.get("subagents"),
                    SUBAGENTS_DEFAULT,
                )?,
                // As upstream: workflows are on unless the agent turns them off.
                workflows: member(
                    "multiagent.workflows",
                    o.get("workflows"),
                    WORKFLOWS_DEFAULT,
                )?,
            })
        }
    }
}

/// Refuses unknown keys of a `multiagent_20261001` request before it is merged into a stored
/// one, so a typo is reported as one.
pub fn check_keys(req: &Value) -> Valid<()> {
    if req.get("type").and_then(Value::as_str) != Some("multiagent_20261001") {
        return Ok(());
    }
    Obj::new("multiagent", req, V2_WHAT, &V2_KEYS)?;
    Ok(())
}

/// Applies the update merge rule: a `multiagent_20261001` body onto a stored
/// `multiagent_20261001` merges member by member; anything else replaces the whole value.
pub fn merge_update(req: &Value, stored: Option<&Value>) -> Valid<Value> {
    let is_v2 = |v: &Value| v.get("type").and_then(Value::as_str) == Some("multiagent_20261001");
    let Some(stored) = stored.filter(|s| is_v2(s) && is_v2(req)) else {
        return Ok(req.clone());
    };
    let mut out = json!({"type": "multiagent_20261001"});
    for key in ["advisor", "subagents", "workflows"] {
        let merged = match req.get(key) {
            None => stored.get(key).cloned().unwrap_or(Value::Null),
            Some(Value::Null) => Value::Null,
            Some(Value::Object(sent)) => {
                if !sent.contains_key("type") {
                    return Err(Invalid::new(format!("`multiagent.{key}.type` is required")));
                }
                match stored.get(key) {
                    Some(Value::Object(old)) if old.get("type") == sent.get("type") => {
                        let mut m = old.clone();
                        for (k, v) in sent {
                            m.insert(k.clone(), v.clone());
                        }
                        Value::Object(m)
                    }
                    _ => Value::Object(sent.clone()),
                }
            }
            Some(_) => {
                return Err(Invalid::new(format!(
                    "`multiagent.{key}` must be an object or null"
                )));
            }
        };
        out[key] = merged;
    }
    Ok(out)
}

fn refs_of(entries: &[Entry], out: &mut BTreeSet<RosterRef>) {
    for e in entries {
        if let Entry::Agent(r) = e {
            out.insert(r.clone());
        }
    }
}

/// Validates the shape of a multiagent request and lists the roster agents it references.
pub fn roster_refs(req: &Value) -> Valid<Vec<RosterRef>> {
    let mut out = BTreeSet::new();
    match parse(req)? {
        Plan::Coordinator(entries) => refs_of(&entries, &mut out),
        Plan::V20261001 {
            subagents,
            workflows,
            ..
        } => {
            refs_of(&subagents.predefined, &mut out);
            refs_of(&workflows.predefined, &mut out);
        }
    }
    Ok(out.into_iter().collect())
}

/// The agent being saved, as roster resolution needs to know it.
pub struct SelfAgent<'a> {
    pub id: &'a str,
    pub version: i64,
    pub inference_geo: Option<&'a str>,
}

fn pin(
    at: &str,
    e: &Entry,
    me: &SelfAgent,
    found: &dyn Fn(&RosterRef) -> Option<Agent>,
    geos: &mut BTreeSet<Option<String>>,
) -> Valid<Value> {
    match e {
        Entry::SelfRef => Ok(json!({"type": "agent", "id": me.id, "version": me.version})),
        Entry::Advisor(model) => Ok(json!({"type": "advisor", "model": model})),
        Entry::Agent(r) => {
            if r.id == me.id {
                return Err(Invalid::new(format!(
                    "`{at}` refers to the agent itself; use {{\"type\":\"self\"}}"
                )));
            }
            let a = found(r).ok_or_else(|| {
                Invalid::new(match r.version {
                    Some(v) => format!("`{at}`: agent `{}` has no version {v}", r.id),
                    None => format!("`{at}`: agent `{}` not found", r.id),
                })
            })?;
            if a.archived_at.is_some() {
                return Err(Invalid::with_code(
                    "agent_archived",
                    format!(
                        "`{at}`: agent `{}` is archived and cannot join a roster",
                        r.id
                    ),
                ));
            }
            if a.multiagent.is_some() {
                return Err(Invalid::new(format!(
                    "`{at}`: agent `{}` has its own `multiagent` configuration; only one level of delegation is allowed",
                    r.id
                )));
            }
            geos.insert(a.model.inference_geo.clone());
            Ok(json!({"type": "agent", "id": a.id, "version": a.version}))
        }
    }
}

fn pin_member(
    at: &str,
    m: &Member,
    me: &SelfAgent,
    found: &dyn Fn(&RosterRef) -> Option<Agent>,
    geos: &mut BTreeSet<Option<String>>,
) -> Valid<Value> {
    if !m.enabled {
        return Ok(json!({"type": "disabled"}));
    }
    let predefined = m
        .predefined
        .iter()
        .enumerate()
        .map(|(i, e)| pin(&format!("{at}.predefined_agents[{i}]"), e, me, found, geos))
        .collect::<Valid<Vec<_>>>()?;
    Ok(json!({
        "type": "enabled",
        "inline_agents": {"type": if m.inline { "enabled" } else { "disabled" }},
        "predefined_agents": predefined,
    }))
}

/// Resolves a multiagent request to the agent form: every roster agent pinned to a concrete
/// version, `self` to the agent being saved, defaults filled in.
pub fn resolve(
    req: &Value,
    me: &SelfAgent,
    found: &dyn Fn(&RosterRef) -> Option<Agent>,
) -> Valid<Value> {
    let mut geos: BTreeSet<Option<String>> = BTreeSet::new();
    geos.insert(me.inference_geo.map(str::to_string));
    let out = match parse(req)? {
        Plan::Coordinator(entries) => {
            let mut agents = Vec::new();
            let mut advisor = None;
            for (i, e) in entries.iter().enumerate() {
                let v = pin(&format!("multiagent.agents[{i}]"), e, me, found, &mut geos)?;
                if matches!(e, Entry::Advisor(_)) {
                    advisor = Some(v);
                } else {
                    agents.push(v);
                }
            }
            // The advisor occupies a reserved slot and is echoed last.
            agents.extend(advisor);
            json!({"type": "coordinator", "agents": agents})
        }
        Plan::V20261001 {
            advisor,
            subagents,
            workflows,
        } => json!({
            "type": "multiagent_20261001",
            "advisor": match advisor {
                Some(model) => json!({"type": "enabled", "model": model}),
                None => json!({"type": "disabled"}),
            },
            "subagents": pin_member("multiagent.subagents", &subagents, me, found, &mut geos)?,
            "workflows": pin_member("multiagent.workflows", &workflows, me, found, &mut geos)?,
        }),
    };
    if geos.len() > 1 {
        return Err(Invalid::new(
            "every agent in the multiagent roster must use the same `model.inference_geo`",
        ));
    }
    Ok(out)
}

/// Every `(id, version)` pinned in an agent-form multiagent value.
pub fn pinned_refs(agent_form: &Value) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    let mut visit = |list: Option<&Value>| {
        for e in list.and_then(Value::as_array).into_iter().flatten() {
            if e.get("type").and_then(Value::as_str) == Some("agent")
                && let (Some(id), Some(v)) = (
                    e.get("id").and_then(Value::as_str),
                    e.get("version").and_then(Value::as_i64),
                )
            {
                out.push((id.to_string(), v));
            }
        }
    };
    visit(agent_form.get("agents"));
    visit(agent_form.pointer("/subagents/predefined_agents"));
    visit(agent_form.pointer("/workflows/predefined_agents"));
    out
}

/// Turns the agent form into the session form: pinned references become full snapshots.
pub fn session_form(
    agent_form: &Value,
    snapshot: &dyn Fn(&str, i64) -> Option<SessionAgent>,
) -> Value {
    let expand = |list: &Value| -> Value {
        Value::Array(
            list.as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let id = e.get("id").and_then(Value::as_str);
                    let v = e.get("version").and_then(Value::as_i64);
                    match (e.get("type").and_then(Value::as_str), id, v) {
                        (Some("agent"), Some(id), Some(v)) => snapshot(id, v)
                            .map(|s| serde_json::to_value(s).expect("serializable"))
                            .unwrap_or_else(|| e.clone()),
                        _ => e.clone(),
                    }
                })
                .collect(),
        )
    };
    let mut out = agent_form.clone();
    if let Some(list) = agent_form.get("agents") {
        out["agents"] = expand(list);
    }
    for key in ["subagents", "workflows"] {
        if let Some(list) = agent_form.get(key).and_then(|m| m.get("predefined_agents")) {
            out[key]["predefined_agents"] = expand(list);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_omitted_members_and_merges_same_type() {
        let stored = json!({"type":"multiagent_20261001","advisor":{"type":"enabled","model":"m"},
            "subagents":{"type":"enabled","inline_agents":{"type":"enabled"},"predefined_agents":[{"type":"agent","id":"a","version":1}]},
            "workflows":{"type":"disabled"}});
        let req = json!({"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{"type":"disabled"}},"workflows":null});
        let m = merge_update(&req, Some(&stored)).unwrap();
        assert_eq!(m["advisor"], stored["advisor"]);
        assert_eq!(m["subagents"]["inline_agents"], json!({"type":"disabled"}));
        assert_eq!(
            m["subagents"]["predefined_agents"],
            stored["subagents"]["predefined_agents"]
        );
        assert_eq!(m["workflows"], Value::Null);
    }

    #[test]
    fn shape_errors() {
        assert!(roster_refs(&json!({"type":"coordinator","agents":[]})).is_err());
        assert!(roster_refs(&json!({"type":"coordinator","agents":["a","a"]})).is_err());
        assert!(
            roster_refs(&json!({"type":"coordinator","agents":[{"type":"self"},{"type":"self"}]}))
                .is_err()
        );
        let many: Vec<Value> = (0..21).map(|i| json!(format!("agent_{i}"))).collect();
        assert!(roster_refs(&json!({"type":"coordinator","agents":many})).is_err());
        assert!(roster_refs(&json!({"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{"type":"disabled"}}})).is_err());
        assert_eq!(
            roster_refs(
                &json!({"type":"coordinator","agents":["b",{"type":"agent","id":"a","version":2}]})
            )
            .unwrap(),
            vec![
                RosterRef {
                    id: "a".into(),
                    version: Some(2)
                },
                RosterRef {
                    id: "b".into(),
                    version: None
                }
            ]
        );
    }

    #[test]
    fn resolves_defaults() {
        let me = SelfAgent {
            id: "me",
            version: 3,
            inference_geo: None,
        };
        let v = resolve(&json!({"type":"multiagent_20261001"}), &me, &|_| None).unwrap();
        assert_eq!(v["advisor"], json!({"type":"disabled"}));
        assert_eq!(
            v["subagents"],
            json!({"type":"enabled","inline_agents":{"type":"enabled"},"predefined_agents":[]})
        );
        let v = resolve(&json!({"type":"coordinator","agents":[{"type":"advisor","model":"x"},{"type":"self"}]}), &me, &|_| None).unwrap();
        assert_eq!(
            v["agents"],
            json!([{"type":"agent","id":"me","version":3},{"type":"advisor","model":"x"}])
        );
        assert!(
            resolve(
                &json!({"type":"coordinator","agents":["missing"]}),
                &me,
                &|_| None
            )
            .is_err()
        );
    }
}
