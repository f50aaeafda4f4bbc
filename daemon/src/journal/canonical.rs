//! The journal's canonical JSON (object keys sorted by their UTF-8 bytes, no whitespace, integers only) and the seal over it: SHA-256, or HMAC-SHA256 with a key.

use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::Value;

use super::canonical_serializer::{write_canonical_of, write_string, CanonicalError};
use sha2::{Digest, Sha256};

/// `prev_hash` of the very first entry of a journal.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The key of an entry's seal.
const HASH_KEY: &[u8] = b"entry_hash";

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
#[cfg(test)]
pub fn sealed_entry<T: Serialize + ?Sized>(
    entry: &T,
    sealer: &Sealer,
) -> Result<(Vec<u8>, String), CanonicalError> {
    let mut line = Vec::with_capacity(1024);
    let hash = sealed_entry_into(entry, sealer, &mut Vec::with_capacity(1024), &mut line)?;
    Ok((line, hash))
}

/// [`sealed_entry`] appended to `out` (no newline), with `scratch` for the canonical body.
/// On an error `out` is as it was. The plain reference the writer's
/// [`sealed_envelope_into`] is tested against (one object, reordered whole).
#[cfg(test)]
pub fn sealed_entry_into<T: Serialize + ?Sized>(
    entry: &T,
    sealer: &Sealer,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<String, CanonicalError> {
    scratch.clear();
    let body = scratch;
    let members = write_canonical_of(entry, body)?;
    if body.first() != Some(&b'{') {
        return Err(serde::ser::Error::custom(
            "a journal entry must be an object",
        ));
    }
    let hash = sealer.seal(body);
    let next = members.iter().find(|member| member.key(body) > HASH_KEY);
    let (at, comma_before, comma_after) = match next {
        Some(member) => (member.start, false, true),
        None if members.is_empty() => (body.len() - 1, false, false),
        None => (body.len() - 1, true, false),
    };
    push_sealed(out, body, (at, comma_before, comma_after), &hash);
    Ok(hash)
}

/// Appends `body` to `out` with the member `"entry_hash":"<hash>"` put in at `at`, with a
/// comma before and/or after it as its place asks.
fn push_sealed(out: &mut Vec<u8>, body: &[u8], place: (usize, bool, bool), hash: &str) {
    let (at, comma_before, comma_after) = place;
    out.reserve(body.len() + HASH_KEY.len() + hash.len() + 8);
    out.extend_from_slice(&body[..at]);
    if comma_before {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(HASH_KEY);
    out.extend_from_slice(b"\":\"");
    out.extend_from_slice(hash.as_bytes());
    out.push(b'"');
    if comma_after {
        out.push(b',');
    }
    out.extend_from_slice(&body[at..]);
}

/// The members every entry has around its own fields (docs/journal.md: `seq`, `at_ms`,
/// `kind`, `prev_hash`, and `by` when someone asked).
pub struct Envelope<'a, B> {
    pub seq: u64,
    pub at_ms: u64,
    pub kind: &'a str,
    pub prev_hash: &'a str,
    pub by: Option<&'a B>,
}

/// Buffers [`sealed_envelope_into`] reuses from entry to entry.
#[derive(Default)]
pub struct SealScratch {
    fields: Vec<u8>,
    body: Vec<u8>,
}

/// The line of an entry made of `envelope` and `fields` (an object whose keys are none of
/// the envelope's), sealed with `sealer`, appended to `out` (no newline); returns its
/// hash. The same bytes as [`sealed_entry_into`] of one object holding both, without
/// reordering the whole entry: the fields' canonical members and the envelope's (whose
/// keys are known and sorted) are merged. On an error `out` is as it was.
pub fn sealed_envelope_into<B: Serialize, F: Serialize + ?Sized>(
    envelope: &Envelope<'_, B>,
    fields: &F,
    sealer: &Sealer,
    scratch: &mut SealScratch,
    out: &mut Vec<u8>,
) -> Result<String, CanonicalError> {
    /// The envelope's keys in canonical order.
    const KEYS: [&str; 5] = ["at_ms", "by", "kind", "prev_hash", "seq"];
    let SealScratch { fields: own, body } = scratch;
    own.clear();
    let members = write_canonical_of(fields, own)?;
    if own.first() != Some(&b'{') {
        return Err(serde::ser::Error::custom(
            "a journal entry's fields must be an object",
        ));
    }
    if members.iter().any(|member| member.key(own) == HASH_KEY) {
        return Err(serde::ser::Error::custom(
            "an entry's own field is named `entry_hash`, which its seal is",
        ));
    }
    // Where each of the fields' members ends (before the `,` or the closing `}`).
    let member_end = |i: usize| match members.get(i + 1) {
        Some(next) => next.start - 1,
        None => own.len() - 1,
    };
    body.clear();
    body.push(b'{');
    // Where `entry_hash` goes: before the first member whose key sorts after it.
    let mut hash_at = None;
    let mut field = 0;
    let push_member = |body: &mut Vec<u8>, key: &[u8], hash_at: &mut Option<usize>| {
        if body.len() > 1 {
            body.push(b',');
        }
        if hash_at.is_none() && key > HASH_KEY {
            *hash_at = Some(body.len());
        }
    };
    for key in KEYS {
        if key == "by" && envelope.by.is_none() {
            continue;
        }
        while let Some(member) = members.get(field) {
            let field_key = member.key(own);
            if field_key == key.as_bytes() {
                return Err(serde::ser::Error::custom(format!(
                    "an entry's own field is named `{key}`, which the envelope holds"
                )));
            }
            if field_key > key.as_bytes() {
                break;
            }
            push_member(body, field_key, &mut hash_at);
            body.extend_from_slice(&own[member.start..member_end(field)]);
            field += 1;
        }
        push_member(body, key.as_bytes(), &mut hash_at);
        body.push(b'"');
        body.extend_from_slice(key.as_bytes());
        body.extend_from_slice(b"\":");
        match key {
            "at_ms" => {
                body.extend_from_slice(itoa::Buffer::new().format(envelope.at_ms).as_bytes())
            }
            "by" => {
                write_canonical_of(&envelope.by, body)?;
            }
            "kind" => write_string(body, envelope.kind),
            "prev_hash" => write_string(body, envelope.prev_hash),
            _ => body.extend_from_slice(itoa::Buffer::new().format(envelope.seq).as_bytes()),
        }
    }
    while let Some(member) = members.get(field) {
        push_member(body, member.key(own), &mut hash_at);
        body.extend_from_slice(&own[member.start..member_end(field)]);
        field += 1;
    }
    body.push(b'}');
    let hash = sealer.seal(body);
    let (at, comma_before, comma_after) = match hash_at {
        // `hash_at` is the start of a member, after its comma.
        Some(at) => (at, false, true),
        None => (body.len() - 1, true, false),
    };
    push_sealed(out, body, (at, comma_before, comma_after), &hash);
    Ok(hash)
}

/// [`sealed_entry`] of a map of values (which always has canonical JSON).
#[cfg(test)]
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
        let (prefix, digest) = match self {
            Sealer::Sha256 => ("sha256:", Sha256::digest(canonical)),
            Sealer::Hmac(key) => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
                mac.update(canonical);
                ("hmac-sha256:", mac.finalize().into_bytes())
            }
        };
        let mut seal = String::with_capacity(prefix.len() + 64);
        seal.push_str(prefix);
        push_hex(&mut seal, &digest);
        seal
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Lowercase hex of `bytes` added to `out`.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 15) as usize] as char);
    }
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
    fn an_envelope_and_its_fields_seal_as_the_one_object_holding_both() {
        let by = json!({"door": "socket", "client": "c", "uid": 1000});
        for (fields, by) in [
            // Keys before, between and after the envelope's and `entry_hash`.
            (
                json!({"drive_id": "d_1", "target": {"session": "s"}, "route": "native_send"}),
                Some(&by),
            ),
            (
                json!({"attempts": [], "zzz": 1, "entry": 0, "kinda": "x", "seqs": [1]}),
                None,
            ),
            (
                json!({"a\"b": 1, "by_far": 2, "\u{1}": {"y": 0, "x": 1}}),
                Some(&by),
            ),
            (json!({}), None),
            (json!({}), Some(&by)),
        ] {
            let envelope = Envelope {
                seq: 7,
                at_ms: 1_700_000_000_123,
                kind: "drive_\"state",
                prev_hash: "sha256:ab",
                by,
            };
            let mut whole = fields.clone();
            whole["seq"] = json!(7);
            whole["at_ms"] = json!(1_700_000_000_123u64);
            whole["kind"] = json!("drive_\"state");
            whole["prev_hash"] = json!("sha256:ab");
            if let Some(by) = by {
                whole["by"] = by.clone();
            }
            for sealer in [Sealer::Sha256, Sealer::Hmac(b"k".to_vec())] {
                let (expected, expected_hash) = sealed_line(whole.as_object().unwrap(), &sealer);
                let mut out = b"before".to_vec();
                let hash = sealed_envelope_into(
                    &envelope,
                    &fields,
                    &sealer,
                    &mut SealScratch::default(),
                    &mut out,
                )
                .unwrap();
                assert_eq!(hash, expected_hash);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    format!("before{}", String::from_utf8(expected).unwrap())
                );
            }
        }
    }

    #[test]
    fn fields_that_are_not_an_object_or_name_an_envelope_member_are_refused() {
        let envelope = Envelope::<Value> {
            seq: 1,
            at_ms: 2,
            kind: "k",
            prev_hash: GENESIS,
            by: None,
        };
        let mut scratch = SealScratch::default();
        for (fields, says) in [
            (json!([1]), "must be an object"),
            (json!({"seq": 9}), "`seq`"),
            (json!({"prev_hash": "x", "a": 1}), "`prev_hash`"),
            (json!({"entry_hash": "forged"}), "`entry_hash`"),
        ] {
            let mut out = b"kept".to_vec();
            let error =
                sealed_envelope_into(&envelope, &fields, &Sealer::Sha256, &mut scratch, &mut out)
                    .unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
            assert_eq!(out, b"kept");
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
