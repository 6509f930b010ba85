//! `mast health`: whether a server answers ready, as an exit code, for container health
//! checks (the runtime image has no curl) and for scripts that wait for a server.

use std::process::ExitCode;
use std::time::Duration;

/// How long the check waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Asks `url`'s `/readyz`: exit 0 when it answers 200, 1 (saying why) otherwise.
pub async fn check(url: &str) -> ExitCode {
    let ready = format!("{}/readyz", url.trim_end_matches('/'));
    let answer = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| e.to_string());
    let answer = match answer {
        Ok(client) => client.get(&ready).send().await.map_err(|e| {
            if e.is_connect() {
                "nothing answers there".to_string()
            } else if e.is_timeout() {
                format!("no answer within {}s", TIMEOUT.as_secs())
            } else {
                e.to_string()
            }
        }),
        Err(e) => Err(e),
    };
    match answer {
        Ok(r) if r.status().is_success() => ExitCode::SUCCESS,
        Ok(r) => {
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            eprintln!("mast: {ready} answered {status}: {}", body.trim());
            ExitCode::FAILURE
        }
        Err(why) => {
            eprintln!("mast: {ready}: {why}");
            ExitCode::FAILURE
        }
    }
}
