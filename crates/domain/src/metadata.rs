//! Metadata maps: limits and patch semantics shared by every resource.

use std::collections::BTreeMap;

use super::invalid::{Invalid, Valid};

/// A resource's metadata as stored and returned.
pub type Metadata = BTreeMap<String, String>;

/// A metadata patch as sent on update: a string upserts, `null` deletes, omitted keys are kept.
pub type MetadataPatch = BTreeMap<String, Option<String>>;

const MAX_PAIRS: usize = 16;
const MAX_KEY: usize = 64;
const MAX_VALUE: usize = 512;

fn invalid(message: String) -> Invalid {
    Invalid::with_code("invalid_metadata", message)
}

/// Checks the upstream limits: at most 16 pairs, keys 1–64 characters, values at most 512.
pub fn validate(metadata: &Metadata) -> Valid<()> {
    if metadata.len() > MAX_PAIRS {
        return Err(invalid(format!(
            "metadata has {} keys; at most {MAX_PAIRS} are allowed",
            metadata.len()
        )));
    }
    for (k, v) in metadata {
        let klen = k.chars().count();
        if klen == 0 || klen > MAX_KEY {
            return Err(invalid(format!(
                "metadata key `{k}` must be 1-{MAX_KEY} characters (got {klen})"
            )));
        }
        let vlen = v.chars().count();
        if vlen > MAX_VALUE {
            return Err(invalid(format!(
                "metadata value for `{k}` must be at most {MAX_VALUE} characters (got {vlen})"
            )));
        }
    }
    Ok(())
}

/// Applies a patch to stored metadata and validates the result. With `empty_deletes`
/// (environments), an empty string deletes the key too.
pub fn apply_patch(
    stored: &Metadata,
    patch: &MetadataPatch,
    empty_deletes: bool,
) -> Valid<Metadata> {
    let mut out = stored.clone();
    for (k, v) in patch {
        match v {
            Some(v) if !(empty_deletes && v.is_empty()) => {
                out.insert(k.clone(), v.clone());
            }
            _ => {
                out.remove(k);
            }
        }
    }
    validate(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        let mut m = Metadata::new();
        for i in 0..16 {
            m.insert(format!("k{i}"), "v".into());
        }
        assert!(validate(&m).is_ok());
        m.insert("k16".into(), "v".into());
        assert_eq!(validate(&m).unwrap_err().code, Some("invalid_metadata"));
        let long_key: Metadata = [("k".repeat(65), "v".to_string())].into();
        assert!(validate(&long_key).is_err());
        let long_value: Metadata = [("k".to_string(), "v".repeat(513))].into();
        assert!(validate(&long_value).is_err());
    }

    #[test]
    fn patch_upserts_and_deletes() {
        let stored: Metadata = [("a".into(), "1".into()), ("b".into(), "2".into())].into();
        let patch: MetadataPatch = [
            ("a".into(), None),
            ("c".into(), Some("3".into())),
            ("b".into(), Some("".into())),
        ]
        .into();
        let out = apply_patch(&stored, &patch, false).unwrap();
        assert_eq!(
            out,
            [("b".into(), "".into()), ("c".into(), "3".into())].into()
        );
        let out = apply_patch(&stored, &patch, true).unwrap();
        assert_eq!(out, [("c".into(), "3".into())].into());
    }
}
