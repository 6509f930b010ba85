//! Which hosts a session may reach, from its environment's networking config: `bash` through
//! the egress proxy and `web_fetch` directly obey the same policy.

use mast_domain::environment::{EnvironmentConfig, Networking};

/// Hosts package managers need when `allow_package_managers` is set.
const PACKAGE_HOSTS: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "github.com",
    "objects.githubusercontent.com",
];

/// A session's network policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressPolicy {
    /// Any host.
    Open,
    /// Only these hosts (`*.example.com` also matches subdomains); empty means no network.
    Limited(Vec<String>),
}

impl EgressPolicy {
    /// The policy of an environment's configuration (self-hosted runs no tools here: open).
    pub fn of(config: &EnvironmentConfig) -> Self {
        match config {
            EnvironmentConfig::Cloud {
                networking:
                    Networking::Limited {
                        allowed_hosts,
                        allow_package_managers,
                        ..
                    },
                ..
            } => {
                let mut hosts: Vec<String> = allowed_hosts
                    .iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect();
                if *allow_package_managers {
                    hosts.extend(PACKAGE_HOSTS.iter().map(|h| h.to_string()));
                }
                EgressPolicy::Limited(hosts)
            }
            _ => EgressPolicy::Open,
        }
    }

    /// Whether `host` may be reached.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match self {
            EgressPolicy::Open => true,
            EgressPolicy::Limited(hosts) => hosts.iter().any(|h| match h.strip_prefix("*.") {
                Some(suffix) => host == suffix || host.ends_with(&format!(".{suffix}")),
                None => *h == host,
            }),
        }
    }

    /// Whether no host at all may be reached.
    pub fn is_closed(&self) -> bool {
        matches!(self, EgressPolicy::Limited(h) if h.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        let p = EgressPolicy::Limited(vec!["api.example.com".into(), "*.corp.net".into()]);
        assert!(p.allows("api.example.com") && p.allows("API.example.com."));
        assert!(!p.allows("example.com") && !p.allows("evil-api.example.com"));
        assert!(p.allows("corp.net") && p.allows("a.b.corp.net") && !p.allows("notcorp.net"));
        assert!(EgressPolicy::Limited(vec![]).is_closed());
        assert!(EgressPolicy::Open.allows("anything"));
    }
}
