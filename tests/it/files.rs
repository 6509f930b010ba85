//! The Files API beyond what the SDK suite covers: the size limit (announced and streamed),
//! strict uploads and list parameters, and the sweeps (expired files, orphan blobs and
//! unfinished uploads) with their bytes, on both stores.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use mast::domain::ids::new_id;
use mast::files::Files;
use mast::store::FileRecord;
use serde_json::Value;

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer, fresh_postgres_database, test_config};

backend_tests!(
    uploads_over_the_limit_are_refused_and_leave_nothing,
    uploads_and_lists_refuse_what_they_cannot_honour,
    expired_files_are_swept_with_their_bytes,
    orphan_blobs_and_unfinished_uploads_are_swept,
);

const BOUNDARY: &str = "mastboundary0123456789";

/// A multipart body: text parts, then a `file` part.
fn multipart(texts: &[(&str, &str)], filename: &str, content_type: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in texts {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
             content-type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn post_upload(s: &TestServer, body: reqwest::Body) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/files", s.url))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    if status == 413 {
        // Refused unread: the client must be told the connection will not be reused, or its
        // next request may go out on a connection the server is closing.
        assert_eq!(
            resp.headers().get("connection").map(|v| v.as_bytes()),
            Some(&b"close"[..])
        );
    }
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn blob_count(s: &TestServer) -> usize {
    ["blobs", "tmp"]
        .iter()
        .map(|d| {
            std::fs::read_dir(s.data_dir.join("files").join(d))
                .map(|r| r.count())
                .unwrap_or(0)
        })
        .sum()
}

/// A server whose uploads may be at most 1000 bytes (and the directory it lives in).
async fn small_limit_server(b: Backend) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::TempDir::new().unwrap();
    let url = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let mut config = test_config(dir.path().to_path_buf(), url, &Options::default());
    config.files.max_bytes = 1000;
    (TestServer::boot(config, b).await, dir)
}

async fn uploads_over_the_limit_are_refused_and_leave_nothing(b: Backend) {
    let (s, _dir) = small_limit_server(b).await;
    // Announced: Content-Length far over the limit, refused before the body is read.
    let big = multipart(
        &[],
        "big.bin",
        "application/octet-stream",
        &vec![7u8; 200_000],
    );
    let (status, body) = post_upload(&s, big.into()).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1000 bytes"),
        "{body}"
    );
    // Streamed (chunked, no length): refused once the bytes pass the limit.
    let chunks = multipart(&[], "big.bin", "application/octet-stream", &vec![7u8; 5000])
        .chunks(512)
        .map(|c| Ok::<_, std::io::Error>(Bytes::copy_from_slice(c)))
        .collect::<Vec<_>>();
    let (status, body) = post_upload(
        &s,
        reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    // Just under the limit is fine, exactly as large as sent.
    let ok = multipart(&[], "ok.bin", "application/octet-stream", &[1u8; 1000]);
    let (status, body) = post_upload(&s, ok.into()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["size_bytes"], 1000);
    assert_eq!(blob_count(&s), 1, "only the accepted upload is stored");
    let list = s.client.get("/v1/files").await.ok();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
}

async fn uploads_and_lists_refuse_what_they_cannot_honour(b: Backend) {
    let s = TestServer::start(b).await;
    let (status, body) = post_upload(
        &s,
        multipart(&[("purpose", "assistants")], "a.txt", "text/plain", b"hi").into(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["details"]["error_code"], "unknown_field");
    for bad in ["60", "7776001", "soon"] {
        let (status, body) = post_upload(
            &s,
            multipart(&[("expires_in_seconds", bad)], "a.txt", "text/plain", b"hi").into(),
        )
        .await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("expires_in_seconds")
        );
    }
    let no_file = format!(
        "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"expires_in_seconds\"\r\n\r\n3600\r\n--{BOUNDARY}--\r\n"
    );
    let (status, body) = post_upload(&s, no_file.into()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(blob_count(&s), 0, "refused uploads keep no bytes");
    let (status, body) = post_upload(
        &s,
        multipart(
            &[("expires_in_seconds", "3600")],
            "dir/a.txt",
            "text/plain",
            b"hi",
        )
        .into(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["filename"], "a.txt");
    let id = body["id"].as_str().unwrap().to_string();
    let m = s
        .client
        .get(&format!("/v1/files?ids[]={id}&limit=5"))
        .await
        .err(400);
    assert!(m.contains("`ids` cannot be combined"), "{m}");
    let e = s.client.get("/v1/files?after_id=file_x").await;
    assert_eq!(
        e.body["error"]["details"]["error_code"],
        "unsupported_feature"
    );
    e.err(400);
    s.client.get("/v1/files?page=nonsense").await.err(400);
    s.client.get("/v1/files?limit=1001").await.err(400);
    let one = s
        .client
        .get(&format!("/v1/files?ids[]={id}&ids[]={id}&ids[]=file_nope"))
        .await
        .ok();
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    assert_eq!(one["next_page"], Value::Null);
    s.client.get("/v1/files/file_nope").await.err(404);
    s.client.get("/v1/files/file_nope/content").await.err(404);
    s.client.delete("/v1/files/file_nope").await.err(404);
}

/// A store and a `Files` on a fresh data directory of `b`.
async fn files_of(
    b: Backend,
) -> (
    std::sync::Arc<Files>,
    std::sync::Arc<dyn mast::store::Store>,
    tempfile::TempDir,
) {
    let dir = tempfile::TempDir::new().unwrap();
    let url = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let config = test_config(dir.path().to_path_buf(), url, &Options::default());
    let store = mast::open_store(&config).await.unwrap();
    let files = Files::open(&config.files, dir.path(), store.clone())
        .await
        .unwrap();
    (std::sync::Arc::new(files), store, dir)
}

async fn put(files: &Files, id: &str, bytes: &'static [u8]) {
    let body = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(bytes))]);
    let size = files.put_bytes(id, Box::pin(body)).await.unwrap();
    assert_eq!(size, bytes.len() as u64);
}

fn record(id: &str, expires_at: Option<i64>) -> FileRecord {
    FileRecord {
        id: id.into(),
        workspace_id: "wrkspc_default".into(),
        filename: "x.txt".into(),
        mime_type: "text/plain".into(),
        size_bytes: 5,
        downloadable: true,
        scope_id: None,
        created_at: 1,
        expires_at,
    }
}

fn blob_exists(dir: &std::path::Path, id: &str) -> bool {
    dir.join("files/blobs").join(id).exists()
}

async fn expired_files_are_swept_with_their_bytes(b: Backend) {
    let (files, store, dir) = files_of(b).await;
    let (gone, kept) = (new_id("file"), new_id("file"));
    put(&files, &gone, b"bytes").await;
    put(&files, &kept, b"bytes").await;
    files.register(&record(&gone, Some(1_000))).await.unwrap();
    files.register(&record(&kept, None)).await.unwrap();
    assert!(matches!(
        files.get("wrkspc_default", &gone).await,
        Err(mast::files::FileError::Expired(_))
    ));
    assert_eq!(files.sweep_expired(999).await.unwrap(), 0);
    assert_eq!(files.sweep_expired(1_000).await.unwrap(), 1);
    assert_eq!(store.get_file("wrkspc_default", &gone).await.unwrap(), None);
    assert!(
        !blob_exists(dir.path(), &gone),
        "an expired file's bytes are freed"
    );
    assert!(blob_exists(dir.path(), &kept));
    files.delete("wrkspc_default", &kept).await.unwrap();
    assert!(
        !blob_exists(dir.path(), &kept),
        "a deleted file's bytes are freed"
    );
}

async fn orphan_blobs_and_unfinished_uploads_are_swept(b: Backend) {
    let (files, _store, dir) = files_of(b).await;
    let (listed, orphan) = (new_id("file"), new_id("file"));
    put(&files, &listed, b"bytes").await;
    files.register(&record(&listed, None)).await.unwrap();
    // A crash after the bytes were durable but before the row was inserted.
    put(&files, &orphan, b"bytes").await;
    // A crash mid-upload.
    let partial = dir
        .path()
        .join("files/tmp")
        .join(format!("{}.x.part", new_id("file")));
    std::fs::write(&partial, b"half").unwrap();
    let before_any = SystemTime::now() - Duration::from_secs(3600);
    assert_eq!(
        files.sweep_orphans(before_any).await.unwrap(),
        0,
        "recent ones are spared"
    );
    let later = SystemTime::now() + Duration::from_secs(1);
    assert_eq!(files.sweep_orphans(later).await.unwrap(), 2);
    assert!(!blob_exists(dir.path(), &orphan));
    assert!(!partial.exists());
    assert!(
        blob_exists(dir.path(), &listed),
        "a listed file keeps its bytes"
    );
}
