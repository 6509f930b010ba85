//! File bytes: the [`BlobStore`] trait and its two implementations, a directory under the
//! data dir ([`local::LocalBlobs`]) and an S3-compatible bucket ([`s3::S3Blobs`]). Bytes
//! always move as streams, so a file is never held whole in memory; metadata lives in the
//! [`crate::Store`], written only once the bytes are durable.

pub mod local;
pub mod s3;

use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

/// Bytes coming in (an upload), possibly failing on the way (the client went away, or the
/// size limit was crossed).
pub type PutStream<'a> = BoxStream<'a, Result<Bytes, BlobError>>;

/// Bytes going out (a download).
pub type GetStream = BoxStream<'static, std::io::Result<Bytes>>;

/// Why a blob operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The incoming bytes crossed the size limit (in bytes).
    #[error("the file is larger than the limit of {0} bytes")]
    TooLarge(u64),
    /// The incoming stream broke off (client disconnect, malformed multipart body).
    #[error("the upload broke off: {0}")]
    Source(String),
    /// No blob under that key.
    #[error("no such blob")]
    NotFound,
    /// The storage itself failed (disk, network, bucket).
    #[error(transparent)]
    Backend(#[from] anyhow::Error),
}

impl From<std::io::Error> for BlobError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            BlobError::NotFound
        } else {
            BlobError::Backend(e.into())
        }
    }
}

/// One stored blob, as a listing sees it.
#[derive(Debug, Clone)]
pub struct BlobInfo {
    pub key: String,
    /// When it was last written; the orphan sweep spares recent ones (an upload in flight).
    pub modified: SystemTime,
}

/// Where file bytes are kept. Keys are file ids (`[A-Za-z0-9_]`).
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// One line for the start-up banner.
    fn describe(&self) -> String;
    /// Stores `body` under `key`, all or nothing: the blob is visible (and durable) only once
    /// the whole stream is written; on any error nothing is left under `key`. Returns the size.
    async fn put_stream(&self, key: &str, body: PutStream<'_>) -> Result<u64, BlobError>;
    /// The bytes under `key`.
    async fn get_stream(&self, key: &str) -> Result<GetStream, BlobError>;
    /// Removes the blob under `key`; a missing one is not an error.
    async fn delete(&self, key: &str) -> Result<(), BlobError>;
    /// Every stored blob.
    async fn list(&self) -> Result<Vec<BlobInfo>, BlobError>;
    /// Removes leftovers of uploads that never finished and were last touched before
    /// `before` (a crash mid-upload); returns how many.
    async fn sweep_partial(&self, before: SystemTime) -> Result<u64, BlobError>;
}

/// Whether `key` is a safe blob key (a file id): no path separators, dots or spaces.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 128
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
