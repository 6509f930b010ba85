//! Files API settings (`MAST_FILES_*`, docs/files-and-resources.md).

use std::time::Duration;

use mast_store::blobs::s3::S3Config;

/// Default largest upload: 500 MB, upstream's documented per-file limit.
pub const DEFAULT_MAX_BYTES: u64 = 500 * 1000 * 1000;

/// Where file bytes go and how large they may be.
#[derive(Debug, Clone)]
pub struct FilesConfig {
    /// `MAST_FILES_MAX_BYTES`: largest upload accepted (413 beyond).
    pub max_bytes: u64,
    /// An S3-compatible bucket (`MAST_FILES_S3_BUCKET` set); else the data directory.
    pub s3: Option<S3Config>,
    /// `MAST_FILES_SWEEP_INTERVAL_MS`: how often expired files are deleted.
    pub sweep_interval: Duration,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            max_bytes: DEFAULT_MAX_BYTES,
            s3: None,
            sweep_interval: Duration::from_secs(60),
        }
    }
}

impl FilesConfig {
    /// Applies the `MAST_FILES_*` variables to `self`.
    pub fn with_env(mut self) -> anyhow::Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(v) = var("MAST_FILES_MAX_BYTES") {
            self.max_bytes = v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("MAST_FILES_MAX_BYTES must be a positive number of bytes")
            })?;
        }
        if let Some(v) = var("MAST_FILES_SWEEP_INTERVAL_MS") {
            let ms: u64 = v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("MAST_FILES_SWEEP_INTERVAL_MS must be milliseconds")
            })?;
            self.sweep_interval = Duration::from_millis(ms);
        }
        if let Some(bucket) = var("MAST_FILES_S3_BUCKET") {
            let mut prefix = var("MAST_FILES_S3_PREFIX").unwrap_or_else(|| "files/".into());
            // Keys are path segments below the prefix; listing matches whole segments.
            if !prefix.is_empty() && !prefix.ends_with('/') {
                prefix.push('/');
            }
            self.s3 = Some(S3Config {
                bucket,
                endpoint: var("MAST_FILES_S3_ENDPOINT"),
                region: var("MAST_FILES_S3_REGION"),
                prefix: prefix.trim_start_matches('/').to_string(),
            });
        } else {
            for name in [
                "MAST_FILES_S3_ENDPOINT",
                "MAST_FILES_S3_REGION",
                "MAST_FILES_S3_PREFIX",
            ] {
                anyhow::ensure!(
                    var(name).is_none(),
                    "{name} is set but MAST_FILES_S3_BUCKET is not: set the bucket to store files in S3"
                );
            }
        }
        Ok(self)
    }
}
