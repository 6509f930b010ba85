//! The egress proxy, the sandbox's only way out: an HTTP proxy (CONNECT and absolute-URI
//! requests) on a Unix socket in the session's state directory, living as long as one
//! command. It enforces the environment's allowed hosts (any host when `unrestricted`) and
//! connects only to addresses the [`NetGuard`] allows. Inside the sandbox, which has no
//! network of its own, a forwarder started from the `mast` binary turns `127.0.0.1:3128`
//! into that socket.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::egress::EgressPolicy;
use super::netguard::NetGuard;
use super::sandbox::PROXY_PORT;

/// A running proxy; stops (and removes its socket) when dropped.
pub struct EgressProxy {
    socket: PathBuf,
    stop: CancellationToken,
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Environment variables pointing programs in the sandbox at the forwarder.
pub fn sandbox_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
        .iter()
        .map(|k| (k.to_string(), url.clone()))
        .chain([("NO_PROXY".to_string(), "localhost,127.0.0.1".to_string())])
        .collect()
}

/// The shell line that starts the forwarder and waits until it listens.
pub fn forwarder_command(_helper: &Path) -> String {
    format!(
        r#""$MAST_HELPER" sandbox-forward --port {PROXY_PORT} --socket "$MAST_STATE/$MAST_PROXY_SOCKET" >/dev/null 2>&1 &
for __i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{PROXY_PORT}) 2>/dev/null && break; sleep 0.02; done"#
    )
}

/// Connections one proxy serves at once; more wait in the listener's backlog.
const MAX_CONNECTIONS: usize = 64;
/// How long a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

impl EgressProxy {
    /// Starts a proxy for `policy` on a fresh socket in `state_dir`, connecting only to
    /// addresses `guard` allows; returns it and the socket's file name.
    pub fn start(
        state_dir: &Path,
        policy: EgressPolicy,
        guard: NetGuard,
    ) -> std::io::Result<(Self, String)> {
        let name = format!("proxy-{}.sock", mast_domain::ids::new_secret(10));
        let socket = state_dir.join(&name);
        let listener = UnixListener::bind(&socket)?;
        let stop = CancellationToken::new();
        let token = stop.clone();
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                tokio::select! {
                    _ = token.cancelled() => return,
                    conn = listener.accept() => match conn {
                        Ok((stream, _)) => {
                            let policy = policy.clone();
                            let token = token.clone();
                            tokio::spawn(async move {
                                let _slot = slot;
                                tokio::select! {
                                    _ = token.cancelled() => {}
                                    _ = serve(stream, policy, guard) => {}
                                }
                            });
                        }
                        // Out of descriptors or similar: give the system a moment rather
                        // than spinning.
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    },
                }
            }
        });
        Ok((EgressProxy { socket, stop }, name))
    }
}

/// Reads the request head (up to the blank line).
async fn read_head(stream: &mut UnixStream) -> std::io::Result<(Vec<u8>, usize)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((buf, end + 4));
        }
        if buf.len() > 64 * 1024 {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

fn target(head: &str) -> Option<(bool, String, u16)> {
    let line = head.lines().next()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?;
    let uri = parts.next()?;
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = uri.rsplit_once(':')?;
        return Some((
            true,
            host.trim_matches(['[', ']']).to_string(),
            port.parse().ok()?,
        ));
    }
    let rest = uri.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.contains('@') {
        return None;
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') => (h.to_string(), p.parse().ok()?),
        _ => (authority.to_string(), 80),
    };
    Some((false, host.trim_matches(['[', ']']).to_string(), port))
}

/// A plain-HTTP request head made safe to forward: one request per connection (so a second,
/// pipelined request cannot name another host), and the proxy's own headers dropped.
fn forwarded_head(head: &str) -> String {
    let mut lines = head.split("\r\n");
    let mut out = String::with_capacity(head.len() + 32);
    out.push_str(lines.next().unwrap_or_default());
    out.push_str("\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if [
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "keep-alive",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

async fn refuse(client: &mut UnixStream, status: &str, body: &str) {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(reply.as_bytes()).await;
}

async fn serve(mut client: UnixStream, policy: EgressPolicy, guard: NetGuard) {
    let Ok(Ok((head, end))) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await
    else {
        return;
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let Some((connect, host, port)) = target(&text) else {
        refuse(
            &mut client,
            "400 Bad Request",
            "Mast: not a proxy request\n",
        )
        .await;
        return;
    };
    if !policy.allows(&host) {
        let body = format!("Mast: `{host}` is not in this environment's allowed_hosts\n");
        refuse(&mut client, "403 Forbidden", &body).await;
        return;
    }
    let mut upstream = match guard.connect(&host, port).await {
        Ok(s) => s,
        Err(why) if why.contains("internal address") => {
            refuse(&mut client, "403 Forbidden", &format!("Mast: {why}\n")).await;
            return;
        }
        Err(why) => {
            refuse(&mut client, "502 Bad Gateway", &format!("Mast: {why}\n")).await;
            return;
        }
    };
    if connect {
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    } else if upstream
        .write_all(forwarded_head(&text).as_bytes())
        .await
        .is_err()
    {
        return;
    }
    // Whatever the client sent beyond the head (a body, or TLS bytes after CONNECT).
    if end < head.len() && upstream.write_all(&head[end..]).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// The in-sandbox forwarder (`mast sandbox-forward`): TCP on 127.0.0.1:`port` to `socket`.
pub async fn forward(port: u16, socket: PathBuf) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    loop {
        let (mut tcp, _) = listener.accept().await?;
        let socket = socket.clone();
        tokio::spawn(async move {
            if let Ok(mut unix) = UnixStream::connect(&socket).await {
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        assert_eq!(
            target("CONNECT pypi.org:443 HTTP/1.1\r\n"),
            Some((true, "pypi.org".into(), 443))
        );
        assert_eq!(
            target("GET http://a.com:8080/x HTTP/1.1\r\n"),
            Some((false, "a.com".into(), 8080))
        );
        assert_eq!(
            target("GET http://a.com/x HTTP/1.1\r\n"),
            Some((false, "a.com".into(), 80))
        );
        assert_eq!(target("GET /x HTTP/1.1\r\n"), None);
        assert_eq!(target("GET http://user@a.com/ HTTP/1.1\r\n"), None);
        assert_eq!(
            target("GET http://[::1]:81/ HTTP/1.1\r\n"),
            Some((false, "::1".into(), 81))
        );
    }

    #[test]
    fn forwarded_heads_close_the_connection() {
        let head = "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n";
        assert_eq!(
            forwarded_head(head),
            "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }
}
