//! A snapshot's manifest: every directory, file and link of the tree, in walk order (a
//! directory before what is in it), each file as the list of its chunks' objects.

use std::io;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::codec;

/// Bytes of a file per chunk: the unit of storage and of sharing, and what a snapshot or a
/// restore holds in memory per transfer.
pub const CHUNK_SIZE: usize = 4 << 20;

/// The manifest format this build writes and reads.
const VERSION: u32 = 1;

/// Largest manifest read back (its JSON): far past any tree within a workspace quota.
const MAX_MANIFEST: usize = 1 << 30;

/// A snapshot of one tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// Wall-clock time the walk began (ns since the epoch): a file changed less than
    /// [`super::take::RACY_NS`] before it is hashed again by the next snapshot, whatever its
    /// status says.
    pub taken_at_ns: i64,
    /// The root directory's device and inode: a snapshot takes files unread only from an
    /// earlier snapshot of this very directory (not of a copy, or of another machine's).
    #[serde(default)]
    pub root_id: Option<(u64, u64)>,
    /// The root directory's permission bits and modification time.
    pub root_mode: u32,
    pub root_mtime_ns: i64,
    pub nodes: Vec<Node>,
}

/// One entry of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Path from the tree's root, components joined by `/`.
    #[serde(rename = "p", with = "name")]
    pub path: Vec<u8>,
    /// Permission bits (without set-user-id and set-group-id).
    #[serde(rename = "m")]
    pub mode: u32,
    /// Modification time, ns since the epoch.
    #[serde(rename = "t")]
    pub mtime_ns: i64,
    #[serde(flatten)]
    pub kind: Kind,
}

/// What a node is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub enum Kind {
    Dir,
    File {
        #[serde(rename = "s")]
        size: u64,
        /// Object keys of its chunks, in order ([`CHUNK_SIZE`] bytes each but the last).
        #[serde(rename = "c")]
        chunks: Vec<String>,
        /// Its status when it was read, so the next snapshot of the same tree can take the
        /// chunks without reading it again.
        #[serde(rename = "i", default, skip_serializing_if = "Option::is_none")]
        stat: Option<Stat>,
    },
    Link {
        #[serde(rename = "l", with = "name")]
        target: Vec<u8>,
    },
}

/// What identifies an unchanged file between two snapshots of one tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    pub ino: u64,
    pub ctime_ns: i64,
}

impl Manifest {
    /// An empty manifest begun at `taken_at_ns`.
    pub fn new(taken_at_ns: i64) -> Self {
        Manifest {
            version: VERSION,
            taken_at_ns,
            root_id: None,
            root_mode: 0o755,
            root_mtime_ns: taken_at_ns,
            nodes: Vec::new(),
        }
    }

    /// Every chunk object it refers to (with repeats).
    pub fn chunks(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .flat_map(|n| match &n.kind {
                Kind::File { chunks, .. } => chunks.as_slice(),
                _ => &[],
            })
            .map(String::as_str)
    }

    /// Bytes in its files.
    pub fn bytes(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| match n.kind {
                Kind::File { size, .. } => size,
                _ => 0,
            })
            .sum()
    }

    /// The manifest as stored, and its key (`m` and the hash of its JSON).
    pub fn seal(&self) -> io::Result<(String, Vec<u8>)> {
        let json = serde_json::to_vec(self).map_err(io::Error::other)?;
        Ok((format!("m{}", codec::hash(&json)), codec::seal(&json)?))
    }

    /// Reads back a manifest stored under `key`, checking it.
    pub fn open(key: &str, stored: &[u8]) -> io::Result<Self> {
        let json = codec::open(key, stored, MAX_MANIFEST)?;
        let manifest: Manifest = serde_json::from_slice(&json)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if manifest.version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "snapshot manifest version {} is not known",
                    manifest.version
                ),
            ));
        }
        Ok(manifest)
    }
}

/// A name or link target as JSON: a string when it is UTF-8 (nearly always), else its bytes
/// in base64 under `b64`.
mod name {
    use super::*;

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Text(String),
        Bytes { b64: String },
    }

    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(bytes) {
            Ok(text) => s.serialize_str(text),
            Err(_) => Wire::Bytes {
                b64: base64::engine::general_purpose::STANDARD.encode(bytes),
            }
            .serialize(s),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        match Wire::deserialize(d)? {
            Wire::Text(t) => Ok(t.into_bytes()),
            Wire::Bytes { b64 } => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_survives_storage_names_of_any_bytes_included() {
        let mut m = Manifest::new(7);
        m.nodes.push(Node {
            path: b"dir".to_vec(),
            mode: 0o755,
            mtime_ns: 1,
            kind: Kind::Dir,
        });
        m.nodes.push(Node {
            path: b"dir/caf\xe9".to_vec(),
            mode: 0o644,
            mtime_ns: 2,
            kind: Kind::File {
                size: 3,
                chunks: vec!["ab".repeat(32)],
                stat: Some(Stat {
                    ino: 4,
                    ctime_ns: 5,
                }),
            },
        });
        m.nodes.push(Node {
            path: b"l".to_vec(),
            mode: 0o777,
            mtime_ns: 3,
            kind: Kind::Link {
                target: b"dir/caf\xe9".to_vec(),
            },
        });
        let (key, stored) = m.seal().unwrap();
        assert!(key.starts_with('m') && super::super::objects::valid_key(&key));
        assert_eq!(Manifest::open(&key, &stored).unwrap(), m);
        assert_eq!(m.bytes(), 3);
        assert_eq!(m.chunks().count(), 1);
    }
}
