//! Records of the Files API's metadata (`/v1/files`); the bytes are in [`crate::blobs`].

use mast_domain::time::Micros;

pub use mast_domain::query::FileFilter;

/// One stored file's metadata row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// `file_…`; also the key of its bytes in the blob store.
    pub id: String,
    pub workspace_id: String,
    /// The final path component of the uploaded name.
    pub filename: String,
    pub mime_type: String,
    pub size_bytes: i64,
    pub downloadable: bool,
    /// The session the file belongs to (session outputs); `None` for uploads.
    pub scope_id: Option<String>,
    pub created_at: Micros,
    /// When it disappears; `None` keeps it until deleted.
    pub expires_at: Option<Micros>,
}
