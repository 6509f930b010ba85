//! The Files API's operations: bytes in the [`BlobStore`], metadata in the [`Store`], kept in
//! step. An upload's bytes are made durable first and its row inserted after, so every listed
//! file can be downloaded; a delete removes the row first, then the bytes. A crash between the
//! two leaves only an orphan blob, which the sweep at start-up removes. A sweep task owned by
//! the server deletes expired files.

pub mod config;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::FilesConfig;
use mast_domain::query::{FileFilter, Scan};
use mast_domain::time::Micros;
use mast_store::blobs::{BlobStore, GetStream, PutStream};
use mast_store::{Store, StoreError};

pub use mast_store::FileRecord;
pub use mast_store::blobs::BlobError;

/// How old a blob without metadata (or an unfinished upload) must be before the start-up
/// sweep removes it: another replica sharing the storage may be between writing a blob and
/// inserting its row.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(3600);
/// Expired files deleted per store call of the sweep.
const SWEEP_BATCH: i64 = 100;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// No such file in the workspace (or it was deleted).
    #[error("file `{0}` not found")]
    NotFound(String),
    /// Its `expires_at` has passed (the sweep has not removed it yet).
    #[error("file `{0}` has expired")]
    Expired(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
}

/// The Files API's storage: blob store, metadata store and the upload size limit.
pub struct Files {
    store: Arc<dyn Store>,
    blobs: Arc<dyn BlobStore>,
    /// Largest accepted upload, in bytes.
    pub max_bytes: u64,
    sweep_interval: Duration,
}

impl Files {
    /// The current time, on the store's clock.
    pub fn now(&self) -> mast_domain::time::Micros {
        self.store.clock().now()
    }

    /// Opens the configured blob store (S3 when a bucket is set, else `<data dir>/files`).
    pub async fn open(
        config: &FilesConfig,
        data_dir: &std::path::Path,
        store: Arc<dyn Store>,
    ) -> anyhow::Result<Self> {
        let blobs: Arc<dyn BlobStore> = match &config.s3 {
            Some(s3) => Arc::new(mast_store::blobs::s3::S3Blobs::open(s3.clone())?),
            None => Arc::new(mast_store::blobs::local::LocalBlobs::open(data_dir).await?),
        };
        Ok(Files {
            store,
            blobs,
            max_bytes: config.max_bytes,
            sweep_interval: config.sweep_interval,
        })
    }

    /// One line for the start-up banner.
    pub fn describe(&self) -> String {
        let limit = match self.max_bytes {
            n if n % 1_000_000 == 0 => format!("{} MB", n / 1_000_000),
            n => format!("{n} bytes"),
        };
        format!("{}, up to {limit} a file", self.blobs.describe())
    }

    /// Stores the bytes of a new file `id` from `body`, failing with
    /// [`BlobError::TooLarge`] as soon as they pass the limit; nothing is kept on error.
    pub async fn put_bytes<E>(
        &self,
        id: &str,
        body: BoxStream<'_, Result<Bytes, E>>,
    ) -> Result<u64, BlobError>
    where
        E: std::fmt::Display,
    {
        let max = self.max_bytes;
        let mut seen = 0u64;
        let limited: PutStream<'_> = body
            .map(move |chunk| {
                let chunk = chunk.map_err(|e| BlobError::Source(e.to_string()))?;
                seen += chunk.len() as u64;
                if seen > max {
                    return Err(BlobError::TooLarge(max));
                }
                Ok(chunk)
            })
            .boxed();
        self.blobs.put_stream(id, limited).await
    }

    /// Lists the file's row once its bytes are stored; on failure the bytes are removed.
    pub async fn register(&self, file: &FileRecord) -> Result<(), StoreError> {
        if let Err(e) = self.store.insert_file(file).await {
            self.discard(&file.id).await;
            return Err(e);
        }
        Ok(())
    }

    /// Removes bytes stored for an upload that will not be registered.
    pub async fn discard(&self, id: &str) {
        if let Err(e) = self.blobs.delete(id).await {
            tracing::warn!(file_id = id, error = %e, "could not remove an unregistered upload; the start-up sweep will");
        }
    }

    /// A live file's metadata.
    pub async fn get(&self, workspace_id: &str, id: &str) -> Result<FileRecord, FileError> {
        let file = self
            .store
            .get_file(workspace_id, id)
            .await?
            .ok_or_else(|| FileError::NotFound(id.to_string()))?;
        if file
            .expires_at
            .is_some_and(|t| t <= self.store.clock().now())
        {
            return Err(FileError::Expired(id.to_string()));
        }
        Ok(file)
    }

    /// A live file's metadata and its bytes.
    pub async fn open_content(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> Result<(FileRecord, GetStream), FileError> {
        let file = self.get(workspace_id, id).await?;
        let bytes = self.blobs.get_stream(&file.id).await.map_err(|e| match e {
            // The row is there but the bytes are not: never expected, so not a plain 404.
            BlobError::NotFound => {
                BlobError::Backend(anyhow::anyhow!("the bytes of file `{id}` are missing"))
            }
            e => e,
        })?;
        Ok((file, bytes))
    }

    /// Deletes a file (expired ones too) and frees its bytes.
    pub async fn delete(&self, workspace_id: &str, id: &str) -> Result<(), FileError> {
        if !self.store.delete_file(workspace_id, id).await? {
            return Err(FileError::NotFound(id.to_string()));
        }
        self.discard(id).await;
        Ok(())
    }

    /// A page of the workspace's files that `filter` keeps.
    pub async fn list(
        &self,
        workspace_id: &str,
        filter: &FileFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<FileRecord>, StoreError> {
        self.store.list_files(workspace_id, filter, scan).await
    }

    /// Deletes every file expired at `now`; returns how many.
    pub async fn sweep_expired(&self, now: Micros) -> Result<u64, FileError> {
        let mut removed = 0;
        loop {
            let batch = self.store.expired_files(now, SWEEP_BATCH).await?;
            let full = batch.len() as i64 == SWEEP_BATCH;
            for f in batch {
                // Another replica may have taken it first; only the one that deleted the row
                // frees the bytes.
                if self.store.delete_file(&f.workspace_id, &f.id).await? {
                    self.discard(&f.id).await;
                    removed += 1;
                }
            }
            if !full {
                return Ok(removed);
            }
        }
    }

    /// Removes unfinished uploads and blobs without metadata last written before `before`;
    /// returns how many.
    pub async fn sweep_orphans(&self, before: SystemTime) -> Result<u64, FileError> {
        let mut removed = self.blobs.sweep_partial(before).await?;
        let old: Vec<String> = self
            .blobs
            .list()
            .await?
            .into_iter()
            .filter(|b| b.modified < before)
            .map(|b| b.key)
            .collect();
        for chunk in old.chunks(500) {
            let known = self.store.existing_file_ids(chunk).await?;
            for key in chunk.iter().filter(|k| !known.contains(k)) {
                self.blobs.delete(key).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Starts the sweep task: orphans once, then expired files every interval, until
    /// `shutdown` is cancelled.
    pub fn spawn_sweeper(self: &Arc<Self>, shutdown: CancellationToken) -> JoinHandle<()> {
        let files = self.clone();
        tokio::spawn(async move {
            let before = SystemTime::now() - ORPHAN_GRACE;
            match files.sweep_orphans(before).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(removed = n, "removed file blobs left by unfinished uploads")
                }
                Err(e) => tracing::warn!(error = %e, "could not sweep orphan file blobs"),
            }
            loop {
                match files.sweep_expired(files.now()).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(removed = n, "deleted expired files"),
                    Err(e) => tracing::warn!(error = %e, "could not sweep expired files"),
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(files.sweep_interval) => {}
                }
            }
        })
    }
}
