//! The well-known credentials and host secrets: the lists the `auto` policy denies by
//! (`engine::permissions`), and the paths it keeps from the calls it approves, read off the
//! same lists (`SECRETS`, `SECRET_NAMES`, environment files outside /workspace), so the policy
//! and the sandbox's masks can never disagree about what is protected. They live with the
//! tools, which mask them, and the policy above reads them from here.
//!
//! A path is protected from the component where the first match begins: `.docker/config.json`
//! hides the whole `.docker` directory, not just the file, because a hidden file's parent can
//! still be renamed (`mv .docker d`) and `d/config.json` would no longer match anything.

/// Text that marks credentials or host secrets wherever it appears in a command or path (also
/// inside /workspace: a key copied there is still a key).
pub const SECRETS: &[&str] = &[
    "/.ssh",
    ".ssh/",
    "ssh_host_",
    "/.aws",
    ".aws/",
    "/.azure",
    ".azure/",
    ".config/gcloud",
    ".config/gh/",
    "/.kube",
    ".kube/",
    "/.gnupg",
    ".gnupg/",
    "/run/secrets",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/ssl/private",
    "/environ",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".docker/config.json",
    ".cargo/credentials",
    ".vault-token",
    "krb5cc_",
];
/// Names of credential directories and files, matched as whole path components (`ls .ssh`,
/// which the text patterns above do not see).
pub const SECRET_NAMES: &[&str] = &[".ssh", ".aws", ".azure", ".kube", ".gnupg"];

/// Whether a path names an environment file (`.env`, `.env.local`, …).
pub fn is_dotenv(path: &str) -> bool {
    let name = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path);
    name == ".env" || name.starts_with(".env.")
}

/// The components of an absolute path once `.` and `..` are resolved.
pub fn components(abs: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = Vec::new();
    for part in abs.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts
}

/// Whether an absolute sandbox path lies in /workspace (`.` and `..` resolved).
fn in_workspace(abs: &str) -> bool {
    components(abs).first() == Some(&"workspace")
}

/// The entry to hide for a protected sandbox path: the prefix of `path` (an absolute path as
/// the sandbox sees it, without a trailing `/`) that names the component where the first
/// protected match begins; `None` when nothing in it is protected. `is_dir` lets patterns
/// ending in `/` (`.ssh/`) match a directory itself.
pub fn hidden_entry(path: &str, is_dir: bool) -> Option<&str> {
    let path = path.trim_end_matches('/');
    let text = if is_dir {
        format!("{path}/")
    } else {
        path.to_string()
    };
    // Byte offsets of the first component each rule matches, in `path`.
    let mut start: Option<usize> = None;
    let mut earliest = |at: usize| start = Some(start.map_or(at, |s| s.min(at)));
    for secret in SECRETS {
        if let Some(at) = text.find(secret) {
            // A leading `/` belongs to the separator: the match begins at the next component.
            let at = if secret.starts_with('/') { at + 1 } else { at };
            earliest(component_start(path, at.min(path.len())));
        }
    }
    let mut offset = 0;
    for component in path.split('/') {
        if component
            .split('=')
            .any(|part| SECRET_NAMES.contains(&part))
        {
            earliest(offset);
        }
        offset += component.len() + 1;
    }
    // Environment files are decided by place: in /workspace they were put there for the agent.
    if is_dotenv(path) && !in_workspace(path) {
        earliest(component_start(path, path.len()));
    }
    let start = start?;
    let end = path[start..].find('/').map_or(path.len(), |e| start + e);
    Some(&path[..end])
}

/// Whether a sandbox path is protected from calls `auto` approved (see [`hidden_entry`]).
pub fn is_protected(path: &str, is_dir: bool) -> bool {
    hidden_entry(path, is_dir).is_some()
}

/// The offset where the component holding byte `at` of `path` begins.
fn component_start(path: &str, at: usize) -> usize {
    path[..at].rfind('/').map_or(0, |slash| slash + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_hidden_is_where_the_match_begins() {
        let table = [
            ("/workspace/.ssh", true, Some("/workspace/.ssh")),
            ("/workspace/.ssh/id_rsa", false, Some("/workspace/.ssh")),
            ("/workspace/a/.ssh", false, Some("/workspace/a/.ssh")),
            (
                "/workspace/deploy/id_ed25519",
                false,
                Some("/workspace/deploy/id_ed25519"),
            ),
            (
                "/workspace/keys/my_id_rsa.pub",
                false,
                Some("/workspace/keys/my_id_rsa.pub"),
            ),
            ("/workspace/.netrc", false, Some("/workspace/.netrc")),
            ("/workspace/p/.docker", true, None),
            (
                "/workspace/p/.docker/config.json",
                false,
                Some("/workspace/p/.docker"),
            ),
            ("/workspace/.config/gh", true, Some("/workspace/.config")),
            ("/workspace/.config/gh", false, None),
            (
                "/workspace/.config/gcloud/x",
                false,
                Some("/workspace/.config"),
            ),
            (
                "/workspace/app/run/secrets/db",
                false,
                Some("/workspace/app/run"),
            ),
            ("/workspace/x=.aws", true, Some("/workspace/x=.aws")),
            ("/workspace/.env", false, None),
            (
                "/mnt/session/uploads/f/.env",
                false,
                Some("/mnt/session/uploads/f/.env"),
            ),
            ("/workspace/src/main.rs", false, None),
            ("/workspace", true, None),
        ];
        for (path, is_dir, hidden) in table {
            assert_eq!(hidden_entry(path, is_dir), hidden, "{path}");
        }
    }
}
