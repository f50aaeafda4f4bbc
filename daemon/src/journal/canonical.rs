//! The journal's canonical JSON (object keys sorted by their UTF-8 bytes, no whitespace, integers only) and the seal over it: SHA-256, or HMAC-SHA256 with a key.

use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::Value;

use super::canonical_serializer::{write_canonical_of, CanonicalError};
use sha2::{Digest, Sha256};

/// `prev_hash` of the very first entry of a journal.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The environment variable holding the HMAC key (its UTF-8 bytes are the key).
pub const HMAC_KEY_ENV: &str = "KORU_JOURNAL_HMAC_KEY";

/// Writes `value` canonically: objects with their keys in ascending byte order, no
/// whitespace, strings escaped as serde_json escapes them (`\"`, `\\`, `\b \f \n \r \t`,
/// other control characters as `\u00xx`, everything else as UTF-8). Independent of how
/// the map type orders its keys.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("writing to a Vec cannot fail");
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec cannot fail"),
    }
}

/// The line of an entry: `entry` (an object with no `entry_hash`) sealed with `sealer`,
/// in canonical form with `entry_hash` in its sorted place. Canonicalizes once: the seal's
/// input and the line share the bytes.
pub fn sealed_entry<T: Serialize + ?Sized>(
    entry: &T,
    sealer: &Sealer,
) -> Result<(Vec<u8>, String), CanonicalError> {
    let mut line = Vec::with_capacity(1024);
    let hash = sealed_entry_into(entry, sealer, &mut Vec::with_capacity(1024), &mut line)?;
    Ok((line, hash))
}

/// [`sealed_entry`] appended to `out` (no newline), with `scratch` for the canonical body:
/// the journal's writer reuses both, so sealing an entry allocates only its hash. On an
/// error `out` is as it was.
pub fn sealed_entry_into<T: Serialize + ?Sized>(
    entry: &T,
    sealer: &Sealer,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<String, CanonicalError> {
    const HASH_KEY: &str = "entry_hash";
    scratch.clear();
    let body = scratch;
    let members = write_canonical_of(entry, body)?;
    if body.first() != Some(&b'{') {
        return Err(serde::ser::Error::custom(
            "a journal entry must be an object",
        ));
    }
    let hash = sealer.seal(body);
    let next = members
        .iter()
        .find(|member| member.key(body) > HASH_KEY.as_bytes());
    let (at, comma_before, comma_after) = match next {
        Some(member) => (member.start, false, true),
        None if members.is_empty() => (body.len() - 1, false, false),
        None => (body.len() - 1, true, false),
    };
    out.reserve(body.len() + HASH_KEY.len() + hash.len() + 8);
    out.extend_from_slice(&body[..at]);
    if comma_before {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(HASH_KEY.as_bytes());
    out.extend_from_slice(b"\":\"");
    out.extend_from_slice(hash.as_bytes());
    out.push(b'"');
    if comma_after {
        out.push(b',');
    }
    out.extend_from_slice(&body[at..]);
    Ok(hash)
}

/// [`sealed_entry`] of a map of values (which always has canonical JSON).
pub fn sealed_line(object: &serde_json::Map<String, Value>, sealer: &Sealer) -> (Vec<u8>, String) {
    sealed_entry(object, sealer).expect("a map of JSON values has canonical JSON")
}

/// [`write_canonical`] into a new buffer.
pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write_canonical(value, &mut out);
    out
}

/// How entries are sealed.
#[derive(Clone)]
pub enum Sealer {
    /// `sha256:<hex>` of the canonical entry: tamper-evident.
    Sha256,
    /// `hmac-sha256:<hex>` keyed with a secret: an edit cannot be re-sealed without it.
    Hmac(Vec<u8>),
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sealer::Sha256 => f.write_str("Sha256"),
            Sealer::Hmac(_) => f.write_str("Hmac(<key>)"),
        }
    }
}

impl Sealer {
    /// The sealer `KORU_JOURNAL_HMAC_KEY` asks for (keyed when set and not empty).
    pub fn from_env() -> Sealer {
        match std::env::var(HMAC_KEY_ENV) {
            Ok(key) if !key.is_empty() => Sealer::Hmac(key.into_bytes()),
            _ => Sealer::Sha256,
        }
    }

    pub fn is_keyed(&self) -> bool {
        matches!(self, Sealer::Hmac(_))
    }

    /// The seal of `canonical` bytes, with its algorithm prefix.
    pub fn seal(&self, canonical: &[u8]) -> String {
        match self {
            Sealer::Sha256 => format!("sha256:{}", hex(&Sha256::digest(canonical))),
            Sealer::Hmac(key) => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
                mac.update(canonical);
                format!("hmac-sha256:{}", hex(&mac.finalize().into_bytes()))
            }
        }
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 15) as usize] as char);
    }
    out
}

/// `sha256` hex of raw bytes (prompt blobs).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_depth_and_nothing_is_spaced() {
        let value =
            json!({"b": 1, "a": {"z": [1, {"y": "x", "c": null}], "é": true, "A": "\n\"\u{1}"}});
        assert_eq!(
            String::from_utf8(canonical(&value)).unwrap(),
            r#"{"a":{"A":"\n\"\u0001","z":[1,{"c":null,"y":"x"}],"é":true},"b":1}"#
        );
    }

    #[test]
    fn a_sealed_line_is_the_canonical_entry_with_its_hash_in_place() {
        for object in [
            json!({"seq": 1, "kind": "x", "prev_hash": "p", "at_ms": 5}),
            json!({"zed": 1}),
            json!({"alpha": {"b": 1, "a": 2}}),
            json!({"zz": 3, "a\"b": 1, "\u{1}": {"y": 0, "x": 1}, "entry": 0}),
            json!({}),
        ] {
            let map = object.as_object().unwrap();
            let (line, hash) = sealed_line(map, &Sealer::Sha256);
            assert_eq!(hash, Sealer::Sha256.seal(&canonical(&object)));
            let mut whole = object.clone();
            whole["entry_hash"] = json!(hash);
            assert_eq!(
                String::from_utf8(line).unwrap(),
                String::from_utf8(canonical(&whole)).unwrap()
            );
        }
    }

    #[test]
    fn seals_are_sha256_or_hmac_with_their_prefix() {
        // SHA-256 of "abc" and HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog"),
        // the published test values.
        assert_eq!(
            Sealer::Sha256.seal(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            Sealer::Hmac(b"key".to_vec()).seal(b"The quick brown fox jumps over the lazy dog"),
            "hmac-sha256:f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }
}
