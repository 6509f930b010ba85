//! `memory_store` session resources: a store attached when a session is
//! created, shown in its sandbox as `/mnt/memory/<slug-of-name>/`. Name and description are
//! snapshotted at attach, so later edits to the store do not move a running session's mount.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, one_of};
use super::invalid::{Invalid, Valid, check_len};
use crate::type_tag;

type_tag!(
    /// `"type": "memory_store"`.
    MemoryStoreResourceTag = "memory_store"
);

/// Where attached stores appear in the sandbox.
pub const MEMORY_MOUNT_ROOT: &str = "/mnt/memory";
/// Most memory stores one session may attach.
pub const MAX_MEMORY_STORES: usize = 8;
/// Most memories a store may hold (the SDK worker's documented per-store cap), whether they
/// are created through the API or by a session's mount.
pub const MAX_MEMORIES_PER_STORE: usize = 2000;
/// Longest `instructions`, in characters (SDK docstring).
const MAX_INSTRUCTIONS: usize = 4096;

/// How a session may use an attached store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

impl Access {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadWrite => "read_write",
            Access::ReadOnly => "read_only",
        }
    }
}

/// A `memory_store` resource as a session shows it (`BetaManagedAgentsMemoryStoreResource`;
/// no `id`: it is addressed by its store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryStoreResource {
    #[serde(rename = "type")]
    pub tag: MemoryStoreResourceTag,
    pub memory_store_id: String,
    pub access: Access,
    pub instructions: Option<String>,
    /// The store's name when it was attached.
    pub name: String,
    /// The store's description when it was attached ("" when it had none).
    pub description: String,
    /// `/mnt/memory/<slug-of-name>`.
    pub mount_path: String,
}

/// A `memory_store` item of a create request, checked but not yet looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryStoreParams {
    /// Where in the request it was (`resources[i]`), for errors found at lookup.
    pub at: String,
    pub memory_store_id: String,
    pub access: Access,
    pub instructions: Option<String>,
}

/// Whether a request's resource item is a `memory_store`.
pub fn is_memory_store(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("memory_store")
}

/// Reads one `memory_store` item at `at`.
pub fn parse(at: &str, v: &Value) -> Valid<MemoryStoreParams> {
    let o = Obj::new(
        at,
        v,
        "a memory_store resource",
        &["type", "memory_store_id", "access", "instructions"],
    )?;
    let memory_store_id = o.req_str("memory_store_id")?.to_string();
    check_len(&o.path("memory_store_id"), &memory_store_id, 1, 128)?;
    let access = match o.str("access")? {
        None | Some("read_write") => Access::ReadWrite,
        Some("read_only") => Access::ReadOnly,
        Some(other) => {
            return Err(one_of(
                &o.path("access"),
                &["read_write", "read_only"],
                other,
            ));
        }
    };
    let instructions = o.str("instructions")?.map(str::to_string);
    if let Some(i) = &instructions
        && i.chars().count() > MAX_INSTRUCTIONS
    {
        return Err(Invalid::new(format!(
            "`{}` is longer than {MAX_INSTRUCTIONS} characters",
            o.path("instructions")
        )));
    }
    Ok(MemoryStoreParams {
        at: at.to_string(),
        memory_store_id,
        access,
        instructions,
    })
}

/// The `memory_store` items of a create body's `resources` (others are read elsewhere): at
/// most [`MAX_MEMORY_STORES`], each store once.
pub fn parse_list(v: Option<&Value>) -> Valid<Vec<MemoryStoreParams>> {
    let Some(Value::Array(list)) = v else {
        return Ok(vec![]);
    };
    let mut out: Vec<MemoryStoreParams> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        if !is_memory_store(item) {
            continue;
        }
        let p = parse(&format!("resources[{i}]"), item)?;
        if out.iter().any(|o| o.memory_store_id == p.memory_store_id) {
            return Err(Invalid::new(format!(
                "`{}.memory_store_id`: memory store `{}` is attached twice",
                p.at, p.memory_store_id
            )));
        }
        out.push(p);
    }
    if out.len() > MAX_MEMORY_STORES {
        return Err(Invalid::new(format!(
            "`resources` attaches {} memory stores; a session attaches at most {MAX_MEMORY_STORES}",
            out.len()
        )));
    }
    Ok(out)
}

/// The directory name of a store: its name lowercased, each run of characters other than
/// ASCII letters and digits turned into one `-`, without leading or trailing `-`
/// (upstream's rule). A name with no letter or digit at all falls back to the store's id.
pub fn slug(name: &str, store_id: &str) -> String {
    let mut s = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let s = s.trim_matches('-');
    if s.is_empty() {
        store_id.to_ascii_lowercase()
    } else {
        s.to_string()
    }
}

/// The mount path of a store named `name`.
pub fn mount_path(name: &str, store_id: &str) -> String {
    format!("{MEMORY_MOUNT_ROOT}/{}", slug(name, store_id))
}

/// The attached stores of a session's stored resources.
pub fn attached(resources: &[Value]) -> Vec<MemoryStoreResource> {
    resources
        .iter()
        .filter(|r| is_memory_store(r))
        .filter_map(|r| serde_json::from_value(r.clone()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slugs_follow_the_documented_rule() {
        assert_eq!(slug("User prefs", "memstore_1"), "user-prefs");
        assert_eq!(slug("  Team / Notes!! 2 ", "memstore_1"), "team-notes-2");
        assert_eq!(slug("Café", "memstore_1"), "caf");
        assert_eq!(slug("***", "memstore_AB"), "memstore_ab");
        assert_eq!(mount_path("A", "m"), "/mnt/memory/a");
    }

    #[test]
    fn items_are_checked() {
        let p = parse(
            "r",
            &json!({"type": "memory_store", "memory_store_id": "memstore_1"}),
        )
        .unwrap();
        assert_eq!(p.access, Access::ReadWrite);
        for bad in [
            json!({"type": "memory_store"}),
            json!({"type": "memory_store", "memory_store_id": "m", "access": "write"}),
            json!({"type": "memory_store", "memory_store_id": "m", "mount_path": "/x"}),
            json!({"type": "memory_store", "memory_store_id": "m", "instructions": "x".repeat(4097)}),
        ] {
            assert!(parse("r", &bad).is_err(), "{bad}");
        }
        let twice = json!([
            {"type": "memory_store", "memory_store_id": "m"},
            {"type": "file", "file_id": "f"},
            {"type": "memory_store", "memory_store_id": "m", "access": "read_only"},
        ]);
        assert!(parse_list(Some(&twice)).is_err());
        let many: Vec<Value> = (0..9)
            .map(|i| json!({"type": "memory_store", "memory_store_id": format!("m{i}")}))
            .collect();
        assert!(parse_list(Some(&Value::Array(many))).is_err());
    }
}
