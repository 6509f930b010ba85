//! How a chunk or a manifest is stored: named by the SHA-256 of its bytes, kept compressed
//! when that is smaller, and checked against its name when read back.

use std::io;

use sha2::{Digest as _, Sha256};

/// The compression level: fast enough that hashing and compressing keep up with the disk on one
/// core, and still a good ratio on source trees and virtualenvs.
const LEVEL: i32 = 1;

/// First byte of a stored object: what follows.
const RAW: u8 = 0;
const ZSTD: u8 = 1;

/// Lowercase hex SHA-256 of `bytes`.
pub fn hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// What is stored for `raw`: compressed when that saves anything, else as it is.
pub fn seal(raw: &[u8]) -> io::Result<Vec<u8>> {
    let packed = zstd::bulk::compress(raw, LEVEL)?;
    let mut out = Vec::with_capacity(1 + packed.len().min(raw.len()));
    if packed.len() < raw.len() {
        out.push(ZSTD);
        out.extend_from_slice(&packed);
    } else {
        out.push(RAW);
        out.extend_from_slice(raw);
    }
    Ok(out)
}

/// The bytes stored as `stored` under `key` (a hash, behind any prefix), at most `limit` of
/// them; an object whose bytes do not hash to its name is refused as corrupt.
pub fn open(key: &str, stored: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    let corrupt = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("snapshot object {key} is corrupt: {why}"),
        )
    };
    let raw = match stored.split_first() {
        Some((&RAW, rest)) => rest.to_vec(),
        Some((&ZSTD, rest)) => {
            zstd::bulk::decompress(rest, limit).map_err(|e| corrupt(&e.to_string()))?
        }
        _ => return Err(corrupt("unknown encoding")),
    };
    if raw.len() > limit {
        return Err(corrupt("larger than it may be"));
    }
    if !key.ends_with(&hash(&raw)) {
        return Err(corrupt("its bytes do not match its name"));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_bytes_open_under_their_hash_and_nothing_else() {
        let text = b"hello hello hello hello hello hello hello".repeat(10);
        let sealed = seal(&text).unwrap();
        assert!(sealed.len() < text.len(), "repetitive text is compressed");
        let key = hash(&text);
        assert_eq!(open(&key, &sealed, 1 << 20).unwrap(), text);
        assert_eq!(open(&format!("m{key}"), &sealed, 1 << 20).unwrap(), text);
        let other = hash(b"other");
        assert_eq!(
            open(&other, &sealed, 1 << 20).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert!(open(&key, &sealed, 10).is_err(), "past the limit");
        // Incompressible bytes are kept as they are.
        let noise: Vec<u8> = (0..128u32)
            .flat_map(|i| Sha256::digest(i.to_le_bytes()))
            .collect();
        let sealed = seal(&noise).unwrap();
        assert_eq!(sealed[0], RAW);
        assert_eq!(open(&hash(&noise), &sealed, 1 << 20).unwrap(), noise);
        assert!(open(&key, &[9, 1, 2], 10).is_err());
    }
}
