//! Blobs in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, …) through `object_store`, for
//! replicas on machines of their own. Uploads go up as a multipart upload in parts of
//! [`PART_SIZE`] with at most [`IN_FLIGHT`] parts in flight, so a large file costs a few parts
//! of memory, and the object appears only when the upload completes (all or nothing).

use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use async_trait::async_trait;
use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::path::Path as ObjectPath;
use tokio::io::AsyncWriteExt as _;

use super::{BlobError, BlobInfo, BlobStore, GetStream, PutStream, valid_key};

/// Bytes buffered before a part is sent (S3's smallest part is 5 MiB).
const PART_SIZE: usize = 8 * 1024 * 1024;
/// Parts uploading at once.
const IN_FLIGHT: usize = 2;

/// Where the bucket is: `MAST_FILES_S3_*`; credentials come from the usual `AWS_*` variables.
#[derive(Debug, Clone, Default)]
pub struct S3Config {
    /// `MAST_FILES_S3_BUCKET`.
    pub bucket: String,
    /// `MAST_FILES_S3_ENDPOINT`: an S3-compatible server; unset for AWS.
    pub endpoint: Option<String>,
    /// `MAST_FILES_S3_REGION` (else `AWS_REGION` / `AWS_DEFAULT_REGION`, else `us-east-1`).
    pub region: Option<String>,
    /// `MAST_FILES_S3_PREFIX`: the key prefix of file blobs (default `files/`).
    pub prefix: String,
}

/// Blobs in an S3-compatible bucket.
pub struct S3Blobs {
    store: Arc<dyn ObjectStore>,
    config: S3Config,
}

fn backend(e: object_store::Error) -> BlobError {
    match e {
        object_store::Error::NotFound { .. } => BlobError::NotFound,
        e => BlobError::Backend(e.into()),
    }
}

impl S3Blobs {
    /// A client for the configured bucket (no request is made until used).
    pub fn open(config: S3Config) -> anyhow::Result<Self> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&config.bucket);
        if let Some(region) = config
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
        {
            b = b.with_region(region);
        }
        if let Some(endpoint) = &config.endpoint {
            // A self-hosted server is addressed by path, often over plain HTTP on a LAN.
            b = b
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"))
                .with_virtual_hosted_style_request(false);
        }
        let store = b
            .build()
            .with_context(|| format!("could not configure the S3 bucket `{}`", config.bucket))?;
        Ok(S3Blobs {
            store: Arc::new(store),
            config,
        })
    }

    fn path(&self, key: &str) -> Result<ObjectPath, BlobError> {
        if !valid_key(key) {
            return Err(BlobError::Backend(anyhow::anyhow!(
                "invalid blob key {key:?}"
            )));
        }
        Ok(ObjectPath::from(format!("{}{key}", self.config.prefix)))
    }
}

#[async_trait]
impl BlobStore for S3Blobs {
    fn describe(&self) -> String {
        format!(
            "S3 bucket {}{}, prefix {:?}",
            self.config.bucket,
            self.config
                .endpoint
                .as_deref()
                .map(|e| format!(" at {e}"))
                .unwrap_or_default(),
            self.config.prefix
        )
    }

    async fn put_stream(&self, key: &str, mut body: PutStream<'_>) -> Result<u64, BlobError> {
        let path = self.path(key)?;
        let mut writer = BufWriter::with_capacity(self.store.clone(), path, PART_SIZE)
            .with_max_concurrency(IN_FLIGHT);
        let mut size = 0u64;
        let written: Result<(), BlobError> = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                size += chunk.len() as u64;
                writer
                    .write_all(&chunk)
                    .await
                    .map_err(|e| BlobError::Backend(e.into()))?;
            }
            // Completes the upload: only now does the object exist.
            writer
                .shutdown()
                .await
                .map_err(|e| BlobError::Backend(e.into()))
        }
        .await;
        if let Err(e) = written {
            if let Err(abort) = writer.abort().await {
                tracing::warn!(error = %abort, key, "could not abort an S3 upload");
            }
            return Err(e);
        }
        Ok(size)
    }

    async fn get_stream(&self, key: &str) -> Result<GetStream, BlobError> {
        let got = self.store.get(&self.path(key)?).await.map_err(backend)?;
        Ok(got.into_stream().map_err(std::io::Error::other).boxed())
    }

    async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match self.store.delete(&self.path(key)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }

    async fn list(&self) -> Result<Vec<BlobInfo>, BlobError> {
        let prefix = ObjectPath::from(self.config.prefix.trim_end_matches('/'));
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(backend)?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let key = m.location.filename()?.to_string();
                valid_key(&key).then(|| BlobInfo {
                    key,
                    modified: m.last_modified.into(),
                })
            })
            .collect())
    }

    async fn sweep_partial(&self, _before: SystemTime) -> Result<u64, BlobError> {
        // An unfinished multipart upload is not an object: it never shows in a listing, and
        // `object_store` cannot list them. A bucket lifecycle rule (AbortIncompleteMultipartUpload)
        // reclaims those of a crashed server; docs/files-and-resources.md says so.
        Ok(0)
    }
}
