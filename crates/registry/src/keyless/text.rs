//! The texts of the keyless material: base64 as Sigstore writes it, and
//! times as messages show them.

use base64::Engine as _;

/// Standard base64, as Sigstore writes it, around spaces.
pub(super) fn b64(text: &str) -> std::result::Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(text.trim())
}

/// An RFC 3339 rendering of Unix seconds, for messages.
pub(super) fn show_time(t: i64) -> String {
    jiff::Timestamp::from_second(t).map_or_else(|_| t.to_string(), |t| t.to_string())
}
