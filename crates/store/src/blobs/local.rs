//! Blobs in a directory of the data dir: `files/blobs/<key>`, written under `files/tmp/` then
//! renamed. The write is fsynced before the rename and the directory after it, so a blob that
//! exists is whole and survives a power loss; a crash mid-upload leaves only a temp file,
//! which [`BlobStore::sweep_partial`] removes at the next start. Directories are 0700 and
//! files 0600 (the bytes are uploads and session outputs).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context as _;
use async_trait::async_trait;
use futures_util::StreamExt as _;
use tokio::io::AsyncWriteExt as _;
use tokio_util::io::ReaderStream;

use super::{BlobError, BlobInfo, BlobStore, GetStream, PutStream, valid_key};

/// Read size of downloads.
const CHUNK: usize = 64 * 1024;

/// Blobs under `<data dir>/files`.
pub struct LocalBlobs {
    blobs: PathBuf,
    tmp: PathBuf,
}

/// Removes a temp file that was not renamed into place, whatever way the upload ended (an
/// error, or its future dropped when the client went away).
struct TempFile(Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn key_path(dir: &Path, key: &str) -> Result<PathBuf, BlobError> {
    if !valid_key(key) {
        return Err(BlobError::Backend(anyhow::anyhow!(
            "invalid blob key {key:?}"
        )));
    }
    Ok(dir.join(key))
}

async fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::File::open(dir)?.sync_all())
        .await
        .map_err(std::io::Error::other)?
}

impl LocalBlobs {
    /// Opens (creating) the blob directories under `data_dir`, private to the server (see
    /// [`mast_domain::private_fs`]); an older install's wider directories are tightened.
    pub async fn open(data_dir: &Path) -> anyhow::Result<Self> {
        let root = data_dir.join("files");
        let (blobs, tmp) = (root.join("blobs"), root.join("tmp"));
        for d in [root, blobs.clone(), tmp.clone()] {
            tokio::task::spawn_blocking({
                let d = d.clone();
                move || mast_domain::private_fs::dir(&d)
            })
            .await?
            .with_context(|| format!("could not create {} (mode 0700)", d.display()))?;
        }
        Ok(LocalBlobs { blobs, tmp })
    }
}

#[async_trait]
impl BlobStore for LocalBlobs {
    fn describe(&self) -> String {
        format!("local directory {}", self.blobs.display())
    }

    async fn put_stream(&self, key: &str, mut body: PutStream<'_>) -> Result<u64, BlobError> {
        let target = key_path(&self.blobs, key)?;
        let tmp_path = self
            .tmp
            .join(format!("{key}.{}.part", mast_domain::ids::new_secret(8)));
        // Private from its creation: the bytes arrive while the file is there to be opened.
        let mut options = mast_domain::private_fs::file_options();
        options.create_new(true);
        let mut file = tokio::fs::OpenOptions::from(options)
            .open(&tmp_path)
            .await?;
        let mut guard = TempFile(Some(tmp_path.clone()));
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            size += chunk.len() as u64;
            file.write_all(&chunk).await?;
        }
        file.flush().await?;
        file.sync_all().await?;
        drop(file);
        tokio::fs::rename(&tmp_path, &target).await?;
        guard.0 = None;
        sync_dir(&self.blobs).await?;
        Ok(size)
    }

    async fn get_stream(&self, key: &str) -> Result<GetStream, BlobError> {
        let file = tokio::fs::File::open(key_path(&self.blobs, key)?).await?;
        Ok(ReaderStream::with_capacity(file, CHUNK).boxed())
    }

    async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match tokio::fs::remove_file(key_path(&self.blobs, key)?).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn list(&self) -> Result<Vec<BlobInfo>, BlobError> {
        let mut out = Vec::new();
        let mut dir = tokio::fs::read_dir(&self.blobs).await?;
        while let Some(entry) = dir.next_entry().await? {
            let Ok(key) = entry.file_name().into_string() else {
                continue;
            };
            let Ok(meta) = entry.metadata().await else {
                continue;
            };
            if meta.is_file() && valid_key(&key) {
                out.push(BlobInfo {
                    key,
                    modified: meta.modified()?,
                });
            }
        }
        Ok(out)
    }

    async fn sweep_partial(&self, before: SystemTime) -> Result<u64, BlobError> {
        let mut removed = 0;
        let mut dir = tokio::fs::read_dir(&self.tmp).await?;
        while let Some(entry) = dir.next_entry().await? {
            let Ok(meta) = entry.metadata().await else {
                continue;
            };
            if meta.is_file()
                && meta.modified()? < before
                && tokio::fs::remove_file(entry.path()).await.is_ok()
            {
                removed += 1;
            }
        }
        Ok(removed)
    }
}
