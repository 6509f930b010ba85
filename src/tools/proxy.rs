//! The egress proxy for `limited` networking with allowed hosts: an HTTP proxy (CONNECT and
//! absolute-URI requests) on a Unix socket in the session's state directory, living as long as
//! one command. Inside the sandbox, which has no network of its own, a forwarder started from
//! the `mast` binary turns `127.0.0.1:3128` into that socket.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use super::egress::EgressPolicy;
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

impl EgressProxy {
    /// Starts a proxy for `policy` on a fresh socket in `state_dir`; returns it and the
    /// socket's file name.
    pub fn start(state_dir: &Path, policy: EgressPolicy) -> std::io::Result<(Self, String)> {
        let name = format!("proxy-{}.sock", crate::domain::ids::new_secret(10));
        let socket = state_dir.join(&name);
        let listener = UnixListener::bind(&socket)?;
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => return,
                    conn = listener.accept() => {
                        if let Ok((stream, _)) = conn {
                            let policy = policy.clone();
                            let token = token.clone();
                            tokio::spawn(async move {
                                tokio::select! {
                                    _ = token.cancelled() => {}
                                    _ = serve(stream, policy) => {}
                                }
                            });
                        }
                    }
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
    let authority = rest.split('/').next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (authority.to_string(), 80),
    };
    Some((false, host, port))
}

async fn serve(mut client: UnixStream, policy: EgressPolicy) {
    let Ok((head, end)) = read_head(&mut client).await else {
        return;
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let Some((connect, host, port)) = target(&text) else {
        let _ = client
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    if !policy.allows(&host) {
        let body = format!("Mast: `{host}` is not in this environment's allowed_hosts\n");
        let reply = format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = client.write_all(reply.as_bytes()).await;
        return;
    }
    let Ok(mut upstream) = TcpStream::connect((host.as_str(), port)).await else {
        let _ = client
            .write_all(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    if connect {
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        if end < head.len() && upstream.write_all(&head[end..]).await.is_err() {
            return;
        }
    } else if upstream.write_all(&head).await.is_err() {
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
    }
}
