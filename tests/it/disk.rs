//! The disk a session can take beyond its workspace quota, and who else on the host can read
//! it: output Files and workspace checkpoints are capped at the workspace quota, and the bytes
//! of uploads, outputs and checkpoints sit in directories only the server may enter.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer, eventually};
use crate::toolset::{call, results, session, steps, toolset, turn};

backend_tests!(
    rewritten_outputs_cannot_pile_up_files_past_the_quota,
    checkpoints_of_a_full_workspace_stay_within_the_quota,
    uploads_outputs_and_checkpoints_are_private_to_the_server,
);

const OUT: &str = "/mnt/session/outputs";

/// A test server whose config `tune` adjusts.
async fn server(b: Backend, tune: impl FnOnce(&mut mast::config::Config)) -> TestServer {
    TestServer::start_tuned(b, Options::default(), tune).await
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

const QUOTA: u64 = 5 << 20;

/// The attack: each call writes a 4 MB output (within the 5 MB quota) and the next deletes
/// it, so the live directory never holds more than the quota while every version became a
/// File of its own.
async fn rewritten_outputs_cannot_pile_up_files_past_the_quota(b: Backend) {
    let s = server(b, |c| c.tools.limits.workspace_bytes = QUOTA).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let write = |i: u32| {
        call(
            "bash",
            json!({"command": format!("head -c 4000000 /dev/urandom > {OUT}/o{i}.bin; echo wrote")}),
        )
    };
    let remove = call(
        "bash",
        json!({"command": format!("rm -f {OUT}/*; echo removed")}),
    );
    let script = steps(&[
        write(1),
        // The live outputs directory counts toward the workspace quota.
        call(
            "bash",
            json!({"command": "head -c 4000000 /dev/zero > /workspace/w; echo rc=$?; rm -f /workspace/w"}),
        ),
        remove.clone(),
        write(2),
        remove.clone(),
        write(3),
        remove,
        call(
            "bash",
            json!({"command": format!("head -c 100000 /dev/urandom > {OUT}/small.bin; echo wrote")}),
        ),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert_eq!(r.len(), 8, "{r:?}");
    assert!(
        !r[0].0.contains("not saved"),
        "the first output fits: {}",
        r[0].0
    );
    assert!(
        !r[1].0.contains("rc=0"),
        "the live outputs count toward the workspace quota: {}",
        r[1].0
    );
    for i in [3, 5] {
        let said = &r[i].0;
        assert!(
            said.contains("wrote")
                && said.contains(&format!(
                    "{OUT}/o{}.bin was not saved as an output file",
                    i / 2 + 1
                ))
                && said.contains("5 MB"),
            "the model is told why: {said}"
        );
    }
    assert!(
        !r[7].0.contains("not saved"),
        "what still fits is kept: {}",
        r[7].0
    );
    let files = s
        .client
        .get(&format!("/v1/files?scope_id={}&limit=100", sess.id))
        .await
        .ok();
    let listed: Vec<(String, u64)> = files["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["filename"].as_str().unwrap().to_string(),
                f["size_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["o1.bin", "small.bin"], "{listed:?}");
    let total: u64 = listed.iter().map(|(_, n)| n).sum();
    assert!(total <= QUOTA, "{total} bytes of output files");
    let stored = crate::support::dir_bytes(&s.data_dir.join("files"));
    assert!(
        stored <= QUOTA + (256 << 10),
        "{stored} bytes stored for the session's outputs"
    );
}

/// Each turn's checkpoint snapshots a workspace holding 4 MB of a 5 MB quota; kept together
/// they stay within the quota, the oldest going first, what the retired ones held is swept
/// from the disk, and a fork at a retired one is refused.
async fn checkpoints_of_a_full_workspace_stay_within_the_quota(b: Backend) {
    let s = server(b, |c| {
        c.tools.limits.workspace_bytes = QUOTA;
        c.tools.snapshot_sweep_interval = std::time::Duration::from_secs(1);
    })
    .await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let mut ends = Vec::new();
    for i in 1..=4 {
        // Two calls: a command's files may grow only into the room left when it starts.
        let script = steps(&[
            call(
                "bash",
                json!({"command": "rm -f /workspace/w*; echo wrote"}),
            ),
            call(
                "bash",
                json!({"command": format!("head -c 4000000 /dev/urandom > /workspace/w{i}; echo wrote")}),
            ),
        ]);
        turn(&s, &mut sess, &script).await;
        ends.push(
            s.client.all_events(&sess.id).await.last().unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let r = results(&sess.st.seen);
    assert!(r.iter().all(|(t, e)| !e && t.contains("wrote")), "{r:?}");
    let dir = s.data_dir.join("workspace-checkpoints").join(&sess.id);
    // Random bytes do not compress: what is kept takes the quota's bytes, and two sweeps
    // after the turns nothing more.
    let objects = s.data_dir.join("workspace-objects");
    eventually(
        30,
        "the retired checkpoints' objects to be swept",
        || async { (crate::support::dir_bytes(&objects) <= QUOTA + (64 << 10)).then_some(()) },
    )
    .await;
    let index: Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let kept: Vec<bool> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kept"].as_bool().unwrap())
        .collect();
    assert_eq!(
        kept,
        [false, false, false, true],
        "the newest fits, and the oldest go first: {index}"
    );
    // The workspace as of turn 1's end was in the second checkpoint, which was dropped.
    let refused = s
        .client
        .post(
            &format!("/v1/sessions/{}/fork", sess.id),
            json!({"event_id": ends[0]}),
        )
        .await
        .err(400);
    assert!(refused.contains("no longer kept"), "{refused}");
    // As of turn 3's end: the newest checkpoint, kept.
    let fork = s
        .client
        .post(
            &format!("/v1/sessions/{}/fork", sess.id),
            json!({"event_id": ends[2]}),
        )
        .await
        .ok();
    let ws = s
        .data_dir
        .join("workspaces")
        .join(fork["id"].as_str().unwrap());
    assert!(ws.join("w3").is_file() && !ws.join("w4").exists());
}

const BOUNDARY: &str = "mastboundary0123456789";

/// Uploaded bytes (and their part file while they arrive), session outputs and checkpoints are
/// readable by the server alone; an install from before is tightened when the server starts.
async fn uploads_outputs_and_checkpoints_are_private_to_the_server(b: Backend) {
    let s = server(b, |c| {
        // An existing install, its directories created with the default umask.
        for d in [
            "files/blobs",
            "files/tmp",
            "workspace-checkpoints",
            "workspace-objects",
        ] {
            let path = c.data_dir.join(d);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::set_permissions(
            c.data_dir.join("files"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let old = c.data_dir.join("session-outputs/sesn_old.registered.json");
        std::fs::create_dir_all(old.parent().unwrap()).unwrap();
        std::fs::write(&old, "{}").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    })
    .await;
    let files = s.data_dir.join("files");
    let checkpoints = s.data_dir.join("workspace-checkpoints");
    let objects = s.data_dir.join("workspace-objects");
    for d in [
        &files,
        &files.join("blobs"),
        &files.join("tmp"),
        &checkpoints,
        &objects,
    ] {
        assert_eq!(mode(d), 0o700, "{}", d.display());
    }
    let outputs = s.data_dir.join("session-outputs");
    assert_eq!(mode(&outputs.join("sesn_old.registered.json")), 0o600);

    // An upload whose body arrives in two parts: the part file is looked at in between.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    let head = format!(
        "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"secret.txt\"\r\n\
         content-type: text/plain\r\n\r\nfirst half "
    );
    tx.send(Ok(Bytes::from(head))).await.unwrap();
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    let url = format!("{}/v1/files", s.url);
    let upload = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    let part = eventually(10, "the upload's part file", || async {
        std::fs::read_dir(files.join("tmp"))
            .ok()?
            .flatten()
            .next()
            .map(|e| e.path())
    })
    .await;
    assert_eq!(mode(&part), 0o600, "the part file, from its creation");
    tx.send(Ok(Bytes::from(format!(
        "second half\r\n--{BOUNDARY}--\r\n"
    ))))
    .await
    .unwrap();
    drop(tx);
    let uploaded = upload.await.unwrap();
    let id = uploaded["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{uploaded}"));
    assert_eq!(mode(&files.join("blobs").join(id)), 0o600);

    // A session with an output and a checkpoint.
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let script = steps(&[call(
        "bash",
        json!({"command": format!("echo private > /workspace/w; echo out > {OUT}/o.txt; echo done")}),
    )]);
    turn(&s, &mut sess, &script).await;
    assert!(results(&sess.st.seen)[0].0.contains("done"));
    let manifest = outputs.join(format!("{}.registered.json", sess.id));
    assert_eq!(mode(&manifest), 0o600, "the outputs' manifest");
    let listed = s
        .client
        .get(&format!("/v1/files?scope_id={}", sess.id))
        .await
        .ok();
    let out_id = listed["data"][0]["id"].as_str().unwrap();
    assert_eq!(
        mode(&files.join("blobs").join(out_id)),
        0o600,
        "an output's bytes"
    );
    assert_eq!(mode(&checkpoints.join(&sess.id)), 0o700);
    assert_eq!(mode(&checkpoints.join(&sess.id).join("index.json")), 0o600);
    // The snapshot's objects (here its manifest alone: the workspace was empty).
    let fans: Vec<_> = std::fs::read_dir(&objects).unwrap().flatten().collect();
    assert!(!fans.is_empty(), "the checkpoint's manifest is stored");
    for fan in fans {
        assert_eq!(mode(&fan.path()), 0o700);
        for object in std::fs::read_dir(fan.path()).unwrap().flatten() {
            assert_eq!(mode(&object.path()), 0o600, "{}", object.path().display());
        }
    }
}
