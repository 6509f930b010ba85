//! Literal `type` tags for wire objects (`"type": "agent"`), typed so the OpenAPI document
//! shows the single allowed value.

/// Declares a one-value enum that serializes as the given string.
#[macro_export]
macro_rules! type_tag {
    ($(#[$meta:meta])* $name:ident = $lit:tt) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub enum $name {
            #[default]
            #[serde(rename = $lit)]
            Tag,
        }
    };
}
