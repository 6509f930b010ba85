//! Tri-state update fields: absent keeps, `null` clears, a value replaces.

use serde::{Deserialize, Deserializer};

/// One field of an update body. Use with `#[serde(default)]` so an absent key is `Absent`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    /// The key was not sent: keep the stored value.
    #[default]
    Absent,
    /// The key was sent as `null`: clear (or reset to default).
    Null,
    /// The key was sent with a value: replace.
    Value(T),
}

impl<T> Patch<T> {
    /// Whether the key was present in the body at all.
    pub fn is_present(&self) -> bool {
        !matches!(self, Patch::Absent)
    }

    /// The sent value, if any (absent and null both give `None`).
    pub fn value(&self) -> Option<&T> {
        match self {
            Patch::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Patch::Null,
            Some(v) => Patch::Value(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        title: Patch<String>,
    }

    #[test]
    fn distinguishes_absent_null_and_value() {
        let b: Body = serde_json::from_str("{}").unwrap();
        assert_eq!(b.title, Patch::Absent);
        let b: Body = serde_json::from_str(r#"{"title":null}"#).unwrap();
        assert_eq!(b.title, Patch::Null);
        let b: Body = serde_json::from_str(r#"{"title":"x"}"#).unwrap();
        assert_eq!(b.title, Patch::Value("x".into()));
    }
}
