//! Session resources: what a session mounts, as given at `sessions.create` or
//! added later with `sessions.resources.add`, and the wire objects the resources endpoints
//! return. `file` and `github_repository` (domain/repository.rs) resources are served here and
//! `memory_store` ones in [`super::memory_resource`].

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, check_len};
use super::repository::{self, RepositoryParams};
use crate::type_tag;

type_tag!(
    /// `"type": "file"`.
    FileResourceTag = "file"
);
type_tag!(
    /// `"type": "session_resource_deleted"`.
    ResourceDeletedTag = "session_resource_deleted"
);

/// Where uploaded files appear when the request names no `mount_path` (SDK docstring).
pub const UPLOADS_DIR: &str = "/mnt/session/uploads";
/// Most file resources one session may hold (the upstream limit).
pub const MAX_FILE_RESOURCES: usize = 999;
/// Longest `mount_path`, in bytes.
const MAX_MOUNT_PATH: usize = 1024;

/// A `file` resource as the API shows it (`BetaManagedAgentsFileResource`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileResource {
    #[serde(rename = "type")]
    pub tag: FileResourceTag,
    /// `sesrsc_…`.
    pub id: String,
    pub file_id: String,
    /// Where the file appears (read-only) in the session's sandbox.
    pub mount_path: String,
    pub created_at: String,
    pub updated_at: String,
}

/// Response of `DELETE /v1/sessions/{id}/resources/{resource_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedResource {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: ResourceDeletedTag,
}

/// A resource a request asks for, checked but not yet looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileResourceParams {
    pub file_id: String,
    /// The path asked for, or the default under [`UPLOADS_DIR`].
    pub mount_path: String,
}

/// A resource a request asks for, of any served kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceParams {
    File(FileResourceParams),
    Repository(RepositoryParams),
}

impl ResourceParams {
    /// Where it appears in the sandbox.
    pub fn mount_path(&self) -> &str {
        match self {
            ResourceParams::File(f) => &f.mount_path,
            ResourceParams::Repository(r) => &r.mount_path,
        }
    }
}

/// Reads one resource of `resources[i]` (at `at`) or of a `resources.add` body.
pub fn parse_resource(at: &str, v: &Value) -> Valid<ResourceParams> {
    if !v.is_object() {
        return Err(must_be(at, "a resource object", v));
    }
    match tag(at, v, &["github_repository", "file", "memory_store"])? {
        "github_repository" => Ok(ResourceParams::Repository(repository::parse(at, v)?)),
        // Stores attach only at creation, as upstream; `parse_resources` leaves them to
        // `memory_resource::parse_list`, so reaching here means `resources.add`.
        "memory_store" => Err(Invalid::new(format!(
            "`{at}`: memory stores attach only when the session is created (`resources` of `sessions.create`)"
        ))),
        _ => {
            let o = Obj::new(at, v, "a file resource", &["type", "file_id", "mount_path"])?;
            let file_id = o.req_str("file_id")?.to_string();
            check_len(&o.path("file_id"), &file_id, 1, 128)?;
            let mount_path = match o.str("mount_path")? {
                None => format!("{UPLOADS_DIR}/{file_id}"),
                Some(p) => check_mount_path(&o.path("mount_path"), p)?,
            };
            Ok(ResourceParams::File(FileResourceParams {
                file_id,
                mount_path,
            }))
        }
    }
}

/// Reads the `resources` of a create body (absent or `null`: none).
pub fn parse_resources(v: Option<&Value>) -> Valid<Vec<ResourceParams>> {
    let list = match v {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(must_be("resources", "a list", other)),
    };
    if list.len() > MAX_FILE_RESOURCES {
        return Err(Invalid::new(format!(
            "`resources` has more than {MAX_FILE_RESOURCES} file resources"
        )));
    }
    let mut out: Vec<ResourceParams> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        if super::memory_resource::is_memory_store(item) {
            continue;
        }
        let at = format!("resources[{i}]");
        let r = parse_resource(&at, item)?;
        check_free(&at, out.iter().map(|o| o.mount_path()), r.mount_path())?;
        out.push(r);
    }
    Ok(out)
}

/// Refuses a mount path another resource of the session already uses, or one inside or
/// around it (two mounts cannot nest).
pub fn check_free<'a>(at: &str, mut taken: impl Iterator<Item = &'a str>, path: &str) -> Valid<()> {
    let nested = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
    match taken.find(|t| nested(t, path) || nested(path, t)) {
        Some(t) => Err(Invalid::new(format!(
            "`{at}.mount_path` `{path}` collides with the mount path `{t}` of another resource of this session"
        ))),
        None => Ok(()),
    }
}

/// A mount path: absolute, normalised (no `.`/`..`/empty segments), not the root, not under
/// the session's workspace or the sandbox's system directories, and not the outputs
/// directory (which stays writable).
fn check_mount_path(at: &str, p: &str) -> Valid<String> {
    check_len(at, p, 2, MAX_MOUNT_PATH)?;
    let bad = |why: &str| Invalid::new(format!("`{at}` `{p}` {why}"));
    if !p.starts_with('/') {
        return Err(bad("must be an absolute path"));
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        return Err(bad("cannot be the root directory"));
    }
    if p[1..]
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == ".." || s.chars().any(char::is_control))
    {
        return Err(bad(
            "must be a normalised path (no empty, `.` or `..` segments, no control characters)",
        ));
    }
    const RESERVED: &[&str] = &[
        "/workspace",
        "/run",
        "/proc",
        "/dev",
        "/tmp",
        "/var/tmp",
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/etc",
        "/mnt/session/outputs",
    ];
    if let Some(r) = RESERVED
        .iter()
        .find(|r| p == **r || p.starts_with(&format!("{r}/")))
    {
        return Err(bad(&format!(
            "is inside `{r}`, which the sandbox keeps for itself; mount under `/mnt/` instead"
        )));
    }
    Ok(p.to_string())
}

/// Reads a `resources.update` body: `{"authorization_token": …}`, which only repositories
/// take (token rotation).
pub fn parse_update(v: &Value) -> Valid<repository::Token> {
    let o = Obj::new("", v, "a resource update", &["authorization_token"])?;
    repository::parse_token("authorization_token", o.req_str("authorization_token")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_resources_get_the_default_mount_path() {
        let r = parse_resource("r", &json!({"type": "file", "file_id": "file_1"})).unwrap();
        assert_eq!(r.mount_path(), "/mnt/session/uploads/file_1");
        let r = parse_resource(
            "r",
            &json!({"type": "file", "file_id": "file_1", "mount_path": "/mnt/data/x.csv/"}),
        )
        .unwrap();
        assert_eq!(r.mount_path(), "/mnt/data/x.csv");
    }

    #[test]
    fn bad_resources_are_refused() {
        for (v, code) in [
            (json!({"type": "file"}), None),
            (
                json!({"type": "file", "file_id": "f", "x": 1}),
                Some("unknown_field"),
            ),
            (
                json!({"type": "file", "file_id": "f", "mount_path": "rel"}),
                None,
            ),
            (
                json!({"type": "file", "file_id": "f", "mount_path": "/a/../b"}),
                None,
            ),
            (
                json!({"type": "file", "file_id": "f", "mount_path": "/workspace/x"}),
                None,
            ),
            (
                json!({"type": "file", "file_id": "f", "mount_path": "/mnt/session/outputs/x"}),
                None,
            ),
            (
                json!({"type": "memory_store", "memory_store_id": "m"}),
                None,
            ),
        ] {
            let e = parse_resource("r", &v).unwrap_err();
            assert_eq!(e.code, code, "{v}");
        }
    }

    #[test]
    fn mount_paths_cannot_collide_or_nest() {
        let list = json!([
            {"type": "file", "file_id": "a", "mount_path": "/mnt/a"},
            {"type": "file", "file_id": "b", "mount_path": "/mnt/a/b"},
        ]);
        assert!(parse_resources(Some(&list)).is_err());
        let list = json!([{"type": "file", "file_id": "a"}, {"type": "file", "file_id": "a"}]);
        assert!(parse_resources(Some(&list)).is_err());
        let list = json!([{"type": "file", "file_id": "a"}, {"type": "file", "file_id": "b"}]);
        assert_eq!(parse_resources(Some(&list)).unwrap().len(), 2);
        let list = json!([
            {"type": "github_repository", "url": "https://h/a/r"},
            {"type": "github_repository", "url": "https://h/b/r.git"},
        ]);
        assert!(parse_resources(Some(&list)).is_err());
    }
}
