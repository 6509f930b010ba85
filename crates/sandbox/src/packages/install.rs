//! The installers: the shell text that installs one package manager's list into the layer,
//! run inside an install sandbox (see [`super::Layers`]). Each uses the manager's own
//! mechanism for installing somewhere other than the system: `pip install --target`,
//! `npm install --prefix`, `cargo install --root`, `go install` with `GOBIN`, `gem install
//! --install-dir`, and for apt a download of the packages and the dependencies this host
//! lacks (resolved against the host's package index and database) extracted with `dpkg-deb
//! -x`, so nothing needs root.

use super::Mirrors;
use crate::sandbox::PACKAGES;

/// Quotes `s` for the shell (specs are validated, but quoting keeps that a second line of
/// defence rather than the only one).
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn specs(list: &[String]) -> String {
    list.iter().map(|s| quote(s)).collect::<Vec<_>>().join(" ")
}

/// Fails with a clear line when `program` is missing on this host.
fn need(program: &str, manager: &str) -> String {
    format!(
        "command -v {program} >/dev/null || {{ echo \"the {manager} installer ({program}) is not installed on this server\"; exit 127; }}\n"
    )
}

/// Lines every install starts with: errors stop it, a private home and the host's CA bundle.
const PRELUDE: &str = r#"set -e
exec 2>&1
export HOME=/tmp/home; mkdir -p "$HOME"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
"#;

/// The script installing `list` with `manager` into the layer.
pub fn script(manager: &str, list: &[String], mirrors: &Mirrors) -> String {
    let p = PACKAGES;
    let s = specs(list);
    let body = match manager {
        "apt" => format!(
            "{need}mkdir -p /tmp/apt/partial {p}/apt\n\
             apt-get install -y -q --download-only --no-install-recommends -o Debug::NoLocking=1 \
             -o Dir::Cache::archives=/tmp/apt -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
             -o APT::Sandbox::User=\"$(id -un)\" {s}\n\
             for f in /tmp/apt/*.deb; do [ -e \"$f\" ] || continue; dpkg-deb -x \"$f\" {p}/apt; done\n",
            need = need("apt-get", "apt") + &need("dpkg-deb", "apt"),
        ),
        "cargo" => format!(
            "{need}export CARGO_HOME=/tmp/cargo\ncargo install --root {p}/cargo{index} {s}\n",
            need = need("cargo", "cargo"),
            index = mirrors
                .cargo
                .as_deref()
                .map(|m| format!(" --index {}", quote(m)))
                .unwrap_or_default(),
        ),
        "gem" => format!(
            "{need}gem install --no-document --install-dir {p}/gem --bindir {p}/gem/bin{source} {s}\n",
            need = need("gem", "gem"),
            source = mirrors
                .gem
                .as_deref()
                .map(|m| format!(" --clear-sources --source {}", quote(m)))
                .unwrap_or_default(),
        ),
        "go" => format!(
            "{need}export GOBIN={p}/go/bin GOPATH=/tmp/go GOCACHE=/tmp/gocache GOFLAGS=-modcacherw\n{proxy}\
             for s in {s}; do case \"$s\" in *@*) ;; *) s=\"$s@latest\";; esac; go install \"$s\"; done\n",
            need = need("go", "go"),
            proxy = mirrors
                .go
                .as_deref()
                .map(|m| format!("export GOPROXY={}\n", quote(m)))
                .unwrap_or_default(),
        ),
        "npm" => format!(
            "{need}export npm_config_cache=/tmp/npm-cache\n\
             [ -n \"$HTTPS_PROXY\" ] && export npm_config_proxy=\"$HTTP_PROXY\" npm_config_https_proxy=\"$HTTPS_PROXY\"\n\
             npm install --no-audit --no-fund --no-update-notifier --prefix {p}/npm{registry} {s}\n",
            need = need("npm", "npm"),
            registry = mirrors
                .npm
                .as_deref()
                .map(|m| format!(" --registry {}", quote(m)))
                .unwrap_or_default(),
        ),
        _ => format!(
            "{need}export PIP_BREAK_SYSTEM_PACKAGES=1\n\
             python3 -m pip install --no-input --disable-pip-version-check --no-cache-dir \
             --no-warn-script-location --target {p}/pip{index} {s}\n",
            need = need("python3", "pip"),
            index = mirrors
                .pip
                .as_deref()
                .map(|m| format!(" --index-url {}", quote(m)))
                .unwrap_or_default(),
        ),
    };
    format!("{PRELUDE}{body}")
}

/// The multiarch directory name of this host's libraries (where apt packages put theirs).
fn multiarch() -> String {
    format!("{}-linux-gnu", std::env::consts::ARCH)
}

/// The variables that make a session's programs find the layer's: `PATH`, `PYTHONPATH`,
/// `NODE_PATH`, `GEM_PATH` and `LD_LIBRARY_PATH`.
pub fn session_env() -> Vec<(String, String)> {
    let p = PACKAGES;
    let arch = multiarch();
    vec![
        (
            "PATH".into(),
            format!(
                "{p}/pip/bin:{p}/npm/node_modules/.bin:{p}/cargo/bin:{p}/go/bin:{p}/gem/bin:\
                 {p}/apt/usr/local/bin:{p}/apt/usr/bin:{p}/apt/bin:{p}/apt/usr/sbin:{p}/apt/sbin:\
                 /usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
            ),
        ),
        ("PYTHONPATH".into(), format!("{p}/pip")),
        ("NODE_PATH".into(), format!("{p}/npm/node_modules")),
        ("GEM_PATH".into(), format!("{p}/gem")),
        (
            "LD_LIBRARY_PATH".into(),
            format!("{p}/apt/usr/lib/{arch}:{p}/apt/lib/{arch}:{p}/apt/usr/lib"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_quoted_and_mirrors_used() {
        let mirrors = Mirrors {
            pip: Some("http://pypi.corp/simple".into()),
            ..Mirrors::default()
        };
        let s = script("pip", &["a==1".into(), "it's".into()], &mirrors);
        assert!(s.contains("--target /opt/mast/packages/pip --index-url 'http://pypi.corp/simple' 'a==1' 'it'\\''s'"), "{s}");
        let s = script("npm", &["left-pad@1".into()], &Mirrors::default());
        assert!(
            s.contains("npm install") && !s.contains("--registry"),
            "{s}"
        );
    }
}
