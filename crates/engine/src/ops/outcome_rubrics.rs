//! File rubrics of `user.define_outcome`: read through the Files store and
//! recorded as text, as the API echoes them ("file rubrics are currently resolved to their
//! text content"), so grading never depends on a file that may be deleted later.

use futures_util::StreamExt as _;

use super::OpError;
use crate::Engine;
use crate::files::FileError;
use mast_domain::events::ClientEvent;
use mast_domain::invalid::Invalid;
use mast_domain::outcome::{MAX_RUBRIC_CHARS, Rubric};
use mast_store::StoreError;

impl Engine {
    /// Replaces each file rubric of `batch` (named `{prefix}[i]` in errors) by the file's
    /// text. A missing or expired file, one that is not UTF-8 text, or one longer than a text
    /// rubric may be, is refused.
    pub(crate) async fn resolve_rubrics(
        &self,
        ws: &str,
        prefix: &str,
        batch: &mut [ClientEvent],
    ) -> Result<(), OpError> {
        for (i, e) in batch.iter_mut().enumerate() {
            let ClientEvent::DefineOutcome(def) = e else {
                continue;
            };
            let Rubric::File(id) = &def.rubric else {
                continue;
            };
            let at = format!("{prefix}[{i}].rubric.file_id");
            let text = self.rubric_text(ws, &at, id).await?;
            def.rubric = Rubric::Text(text);
        }
        Ok(())
    }

    async fn rubric_text(&self, ws: &str, at: &str, id: &str) -> Result<String, OpError> {
        let Some(files) = self.inner.files.as_ref() else {
            return Err(Invalid::unsupported(
                at,
                "file rubric",
                "this server runs without file storage; send the rubric as text",
            )
            .into());
        };
        let refuse = |why: String| -> OpError { Invalid::new(format!("`{at}`: {why}")).into() };
        let (_, mut stream) = match files.open_content(ws, id).await {
            Ok(v) => v,
            Err(FileError::NotFound(_)) => return Err(refuse(format!("file `{id}` not found"))),
            Err(FileError::Expired(_)) => return Err(refuse(format!("file `{id}` has expired"))),
            Err(FileError::Store(e)) => return Err(e.into()),
            Err(e) => return Err(StoreError::Internal(anyhow::anyhow!(e)).into()),
        };
        // A rubric is at most MAX_RUBRIC_CHARS characters, so at most four bytes each.
        let max_bytes = MAX_RUBRIC_CHARS * 4;
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| StoreError::Internal(anyhow::anyhow!(e.to_string())))?;
            if bytes.len() + chunk.len() > max_bytes {
                return Err(refuse(format!(
                    "file `{id}` is longer than a rubric may be ({MAX_RUBRIC_CHARS} characters)"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            refuse(format!(
                "file `{id}` is not UTF-8 text; a rubric file must be text"
            ))
        })?;
        if text.contains('\0') {
            return Err(refuse(format!(
                "file `{id}` is not text; a rubric file must be text"
            )));
        }
        let n = text.chars().count();
        if n == 0 || n > MAX_RUBRIC_CHARS {
            return Err(refuse(format!(
                "file `{id}` has {n} characters; a rubric has 1 to {MAX_RUBRIC_CHARS}"
            )));
        }
        Ok(text)
    }
}
