//! The journal's canonical JSON written straight from any `Serialize` value (no `serde_json::Value` tree in between): members are written where they come and an object whose keys came out of order is reordered in place when it closes. Byte for byte what `canonical::write_canonical` writes for the same value's `serde_json::to_value`.

use serde::ser::{self, Serialize};

/// Why a value has no canonical JSON: a map key that is not a string, a number or a unit
/// variant (as `serde_json::to_value` refuses), or a `Serialize` impl's own error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CanonicalError(String);

impl ser::Error for CanonicalError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CanonicalError(msg.to_string())
    }
}

/// One member of an object being written: where its key's text starts and ends (inside
/// the quotes) and where the member ends, as offsets in the output.
#[derive(Debug, Clone, Copy)]
struct Member {
    start: usize,
    key: (usize, usize),
    end: usize,
}

/// A member of the outermost object, in canonical order: where it starts (its key's
/// opening quote) and its key.
#[derive(Debug, Clone)]
pub struct TopMember {
    pub start: usize,
    /// The key's text inside the quotes, as offsets in the output.
    raw: (usize, usize),
    /// The key unescaped, only when its JSON text has escapes (then `raw` is not the key).
    unescaped: Option<String>,
}

impl TopMember {
    /// The key's UTF-8 bytes (unescaped), read from the output it was written to.
    pub fn key<'o>(&'o self, out: &'o [u8]) -> &'o [u8] {
        match &self.unescaped {
            Some(text) => text.as_bytes(),
            None => &out[self.raw.0..self.raw.1],
        }
    }
}

/// Where the top-level object's members ended up, in canonical order.
pub type TopLevel = Vec<TopMember>;

/// The output and the bookkeeping every object being written shares: one set of buffers
/// for a whole value, not an allocation per object (the journal writes two entries per
/// drive on the event loop).
struct Scratch {
    out: Vec<u8>,
    /// The members of the objects open now, the innermost object's last.
    members: Vec<Member>,
    /// An out-of-order object's bytes while its members are put back in order.
    spare: Vec<u8>,
    top: TopLevel,
}

/// Appends `value`'s canonical JSON to `out`. When `value` is an object, also returns
/// where each of its members starts (so a member can be inserted in its sorted place).
pub fn write_canonical_of<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<TopLevel, CanonicalError> {
    let mut scratch = Scratch {
        out: std::mem::take(out),
        members: Vec::with_capacity(32),
        spare: Vec::new(),
        top: TopLevel::new(),
    };
    let written = value.serialize(Canonical {
        s: &mut scratch,
        top: true,
    });
    *out = scratch.out;
    written.map(|()| scratch.top)
}

/// The serializer: writes into the scratch's output; `top` is set only for the outermost
/// value.
struct Canonical<'a> {
    s: &'a mut Scratch,
    top: bool,
}

/// A JSON string: copied as it is between quotes when nothing in it is escaped (most
/// of the journal's strings), else escaped as serde_json escapes.
pub fn write_string(out: &mut Vec<u8>, text: &str) {
    if text
        .bytes()
        .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
    {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text).expect("writing to a Vec cannot fail");
    }
}

/// An object being written.
struct Object<'a> {
    s: &'a mut Scratch,
    top: bool,
    /// Offset of the `{`.
    open: usize,
    /// Where this object's members start in the scratch's member stack.
    base: usize,
}

impl<'a> Object<'a> {
    fn begin(s: &'a mut Scratch, top: bool) -> Object<'a> {
        let open = s.out.len();
        s.out.push(b'{');
        let base = s.members.len();
        Object { s, top, open, base }
    }

    /// Starts a member: the comma; the key's JSON string is written next.
    fn key_start(&mut self) -> usize {
        if self.s.members.len() > self.base {
            self.s.out.push(b',');
        }
        self.s.out.len()
    }

    /// Ends a member's key written since `start` (its JSON string) with the colon.
    fn key_end(&mut self, start: usize) {
        let key_end = self.s.out.len();
        self.s.out.push(b':');
        self.s.members.push(Member {
            start,
            key: (start + 1, key_end - 1),
            end: start,
        });
    }

    /// Starts a member named `key`.
    fn key(&mut self, key: &str) {
        let start = self.key_start();
        write_string(&mut self.s.out, key);
        self.key_end(start);
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        value.serialize(Canonical {
            s: &mut *self.s,
            top: false,
        })?;
        if self.s.members.len() > self.base {
            let end = self.s.out.len();
            if let Some(member) = self.s.members.last_mut() {
                member.end = end;
            }
        }
        Ok(())
    }

    /// The key's raw text (keys are compared by their UTF-8 bytes, unescaped).
    fn key_text(out: &[u8], member: &Member) -> String {
        let quoted = &out[member.key.0 - 1..member.key.1 + 1];
        serde_json::from_slice(quoted).expect("a key this serializer wrote is a JSON string")
    }

    /// Closes the object (reordering its members when they came out of order) and gives
    /// the scratch back.
    fn finish(self) -> &'a mut Scratch {
        let Object { s, top, open, base } = self;
        let Scratch {
            out,
            members: stack,
            spare,
            top: top_list,
        } = &mut *s;
        let (in_order, escaped) = {
            let members = &stack[base..];
            let raw = |m: &Member| &out[m.key.0..m.key.1];
            (
                members.windows(2).all(|w| raw(&w[0]) < raw(&w[1])),
                // Keys with escapes compare by their unescaped text (rare: only map keys
                // can hold characters JSON escapes).
                members.iter().any(|m| raw(m).contains(&b'\\')),
            )
        };
        if in_order && !escaped {
            if top {
                top_list.extend(stack[base..].iter().map(|m| TopMember {
                    start: m.start,
                    raw: m.key,
                    unescaped: None,
                }));
            }
            out.push(b'}');
            stack.truncate(base);
            return s;
        }
        // Stable sorts: of members with the same key, the last one written wins (as a map
        // built from them keeps the last insert).
        let texts: Option<Vec<String>> = if escaped {
            let texts: Vec<String> = stack[base..]
                .iter()
                .map(|m| Object::key_text(out, m))
                .collect();
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by(|&a, &b| texts[a].as_bytes().cmp(texts[b].as_bytes()));
            let reordered: Vec<Member> = order.iter().map(|&i| stack[base + i]).collect();
            stack[base..].copy_from_slice(&reordered);
            Some(order.iter().map(|&i| texts[i].clone()).collect())
        } else {
            stack[base..].sort_by(|a, b| out[a.key.0..a.key.1].cmp(&out[b.key.0..b.key.1]));
            None
        };
        spare.clear();
        spare.extend_from_slice(&out[open + 1..]);
        out.truncate(open + 1);
        let members = &stack[base..];
        let same_key = |i: usize, j: usize| match &texts {
            Some(texts) => texts[i] == texts[j],
            None => {
                let key = |m: &Member| &spare[m.key.0 - open - 1..m.key.1 - open - 1];
                key(&members[i]) == key(&members[j])
            }
        };
        let mut first = true;
        for i in 0..members.len() {
            if i + 1 < members.len() && same_key(i, i + 1) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            let member = members[i];
            let start = out.len();
            if top {
                let key_len = member.key.1 - member.key.0;
                top_list.push(TopMember {
                    start,
                    raw: (start + 1, start + 1 + key_len),
                    unescaped: texts.as_ref().map(|texts| texts[i].clone()),
                });
            }
            out.extend_from_slice(&spare[member.start - open - 1..member.end - open - 1]);
        }
        out.push(b'}');
        stack.truncate(base);
        s
    }
}

/// An array being written.
struct Array<'a> {
    s: &'a mut Scratch,
    first: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        if !self.first {
            self.s.out.push(b',');
        }
        self.first = false;
        value.serialize(Canonical {
            s: &mut *self.s,
            top: false,
        })
    }
}

/// A map being written: its keys must come out as strings (as `serde_json::to_value` asks).
pub struct MapWriter<'a> {
    object: Object<'a>,
}

/// `{"Variant":[…]}`.
pub struct VariantArray<'a> {
    array: Array<'a>,
}

/// `{"Variant":{…}}`.
pub struct VariantObject<'a> {
    object: Object<'a>,
}

/// Opens `{"variant":` (one member: already in order).
fn open_variant(s: &mut Scratch, variant: &str) {
    s.out.push(b'{');
    write_string(&mut s.out, variant);
    s.out.push(b':');
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = CanonicalError;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = VariantArray<'a>;
    type SerializeMap = MapWriter<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = VariantObject<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), CanonicalError> {
        self.s
            .out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), CanonicalError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), CanonicalError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), CanonicalError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), CanonicalError> {
        self.s
            .out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), CanonicalError> {
        // As `serde_json::to_value`: within 64 bits, or refused.
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(v), _) => self.serialize_i64(v),
            (_, Ok(v)) => self.serialize_u64(v),
            _ => Err(ser::Error::custom("number out of range")),
        }
    }
    fn serialize_u8(self, v: u8) -> Result<(), CanonicalError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), CanonicalError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), CanonicalError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), CanonicalError> {
        self.s
            .out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), CanonicalError> {
        match u64::try_from(v) {
            Ok(v) => self.serialize_u64(v),
            Err(_) => Err(ser::Error::custom("number out of range")),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), CanonicalError> {
        // `serde_json::to_value` keeps an f32 as the f64 it widens to.
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), CanonicalError> {
        serde_json::to_writer(&mut self.s.out, &serde_json::Value::from(v))
            .expect("writing to a Vec cannot fail");
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), CanonicalError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), CanonicalError> {
        write_string(&mut self.s.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), CanonicalError> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for byte in v {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), CanonicalError> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), CanonicalError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), CanonicalError> {
        self.s.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), CanonicalError> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), CanonicalError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), CanonicalError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), CanonicalError> {
        let mut object = Object::begin(self.s, self.top);
        object.key(variant);
        object.value(value)?;
        object.finish();
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'a>, CanonicalError> {
        self.s.out.push(b'[');
        Ok(Array {
            s: self.s,
            first: true,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, CanonicalError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Array<'a>, CanonicalError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<VariantArray<'a>, CanonicalError> {
        open_variant(self.s, variant);
        self.s.out.push(b'[');
        Ok(VariantArray {
            array: Array {
                s: self.s,
                first: true,
            },
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<MapWriter<'a>, CanonicalError> {
        Ok(MapWriter {
            object: Object::begin(self.s, self.top),
        })
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, CanonicalError> {
        Ok(Object::begin(self.s, self.top))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<VariantObject<'a>, CanonicalError> {
        open_variant(self.s, variant);
        Ok(VariantObject {
            object: Object::begin(self.s, false),
        })
    }
}

impl ser::SerializeSeq for Array<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), CanonicalError> {
        self.element(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        self.s.out.push(b']');
        Ok(())
    }
}

impl ser::SerializeTuple for Array<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), CanonicalError> {
        self.element(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for Array<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        self.element(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleVariant for VariantArray<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        self.array.element(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        self.array.s.out.extend_from_slice(b"]}");
        Ok(())
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), CanonicalError> {
        self.key(key);
        self.value(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeStructVariant for VariantObject<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), CanonicalError> {
        self.object.key(key);
        self.object.value(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        self.object.finish().out.push(b'}');
        Ok(())
    }
}

impl ser::SerializeMap for MapWriter<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), CanonicalError> {
        let start = self.object.key_start();
        key.serialize(KeyText(&mut self.object.s.out))?;
        self.object.key_end(start);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        self.object.value(value)
    }
    fn end(self) -> Result<(), CanonicalError> {
        self.object.finish();
        Ok(())
    }
}

/// A map key as the text `serde_json::to_value` makes of it: strings, chars, integers,
/// booleans and unit variants; anything else is refused.
struct KeyText<'o>(&'o mut Vec<u8>);

impl KeyText<'_> {
    /// A key that is not a string in Rust, written as the JSON string of its text.
    fn quoted(self, text: &str) -> Result<(), CanonicalError> {
        self.0.push(b'"');
        self.0.extend_from_slice(text.as_bytes());
        self.0.push(b'"');
        Ok(())
    }
}

fn refused_key() -> CanonicalError {
    ser::Error::custom("key must be a string")
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = CanonicalError;
    type SerializeSeq = ser::Impossible<(), CanonicalError>;
    type SerializeTuple = ser::Impossible<(), CanonicalError>;
    type SerializeTupleStruct = ser::Impossible<(), CanonicalError>;
    type SerializeTupleVariant = ser::Impossible<(), CanonicalError>;
    type SerializeMap = ser::Impossible<(), CanonicalError>;
    type SerializeStruct = ser::Impossible<(), CanonicalError>;
    type SerializeStructVariant = ser::Impossible<(), CanonicalError>;

    fn serialize_bool(self, v: bool) -> Result<(), CanonicalError> {
        self.quoted(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), CanonicalError> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_f32(self, _v: f32) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_f64(self, _v: f64) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_char(self, v: char) -> Result<(), CanonicalError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), CanonicalError> {
        write_string(self.0, v);
        Ok(())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_none(self) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_unit(self) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), CanonicalError> {
        write_string(self.0, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), CanonicalError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), CanonicalError> {
        Err(refused_key())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, CanonicalError> {
        Err(refused_key())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, CanonicalError> {
        Err(refused_key())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, CanonicalError> {
        Err(refused_key())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, CanonicalError> {
        Err(refused_key())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, CanonicalError> {
        Err(refused_key())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, CanonicalError> {
        Err(refused_key())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, CanonicalError> {
        Err(refused_key())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;
    use crate::journal::canonical::canonical;

    /// What the journal wrote before: the value as `serde_json::Value`, then walked.
    fn through_values<T: Serialize>(value: &T) -> Vec<u8> {
        canonical(&serde_json::to_value(value).unwrap())
    }

    fn direct<T: Serialize>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        write_canonical_of(value, &mut out).unwrap();
        out
    }

    #[derive(serde::Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Fields { zeta: bool, alpha: Option<u8> },
    }

    #[derive(serde::Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        Moved { to: String, at_ms: u64 },
    }

    /// Fields declared out of order, skipped ones, nested out-of-order structs, maps with
    /// integer keys, a flattened map that repeats a key, every kind of enum variant.
    #[derive(serde::Serialize)]
    struct Mixed {
        zulu: u64,
        alpha: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        none: Option<u8>,
        nested: Vec<Tagged>,
        shapes: Vec<Shape>,
        numbers: BTreeMap<u32, f64>,
        bytes: &'static [u8],
        ratio: f32,
        #[serde(flatten)]
        extra: HashMap<String, Value>,
    }

    #[test]
    fn typed_values_come_out_as_their_json_values_do() {
        let mixed = Mixed {
            zulu: u64::MAX,
            alpha: "é \"quoted\" \u{1} ✓ 🎉",
            skipped: None,
            none: None,
            nested: vec![Tagged::Moved {
                to: "b".into(),
                at_ms: 7,
            }],
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(3),
                Shape::Tuple(-4, "t".into()),
                Shape::Fields {
                    zeta: true,
                    alpha: Some(1),
                },
            ],
            numbers: BTreeMap::from([(10, 0.5), (9, -1e300), (100, f64::NAN)]),
            bytes: b"\x00\xff",
            ratio: 1.1,
            extra: HashMap::from([
                (
                    "middle".to_string(),
                    serde_json::json!({"y": 1, "x": [2, {"b": 1, "a": 0}]}),
                ),
                ("\u{7f}weird\nkey".to_string(), Value::Null),
            ]),
        };
        let written = direct(&mixed);
        assert_eq!(
            String::from_utf8(written.clone()).unwrap(),
            String::from_utf8(through_values(&mixed)).unwrap()
        );
    }

    #[test]
    fn the_members_of_the_outer_object_are_named_in_order() {
        let mut out = b"[".to_vec();
        let top = write_canonical_of(
            &serde_json::json!({"b": {"z": 1, "a": 2}, "a": 1}),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, br#"[{"a":1,"b":{"a":2,"z":1}}"#);
        let starts: Vec<(usize, &[u8])> = top.iter().map(|m| (m.start, m.key(&out))).collect();
        assert_eq!(starts, [(2, &b"a"[..]), (8, &b"b"[..])]);
        // Out of order, and a key with an escape: named by its text.
        let mut out = Vec::new();
        let top = write_canonical_of(
            &serde_json::json!({"z": 1, "a\"q": 2, "m": {"y": 0, "b": 1}}),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, br#"{"a\"q":2,"m":{"b":1,"y":0},"z":1}"#);
        let starts: Vec<(usize, &[u8])> = top.iter().map(|m| (m.start, m.key(&out))).collect();
        assert_eq!(
            starts,
            [(1, &b"a\"q"[..]), (10, &b"m"[..]), (28, &b"z"[..])]
        );
    }

    #[test]
    fn a_map_key_json_cannot_name_is_refused_not_guessed() {
        let map = BTreeMap::from([((1, 2), 3)]);
        assert!(write_canonical_of(&map, &mut Vec::new()).is_err());
        assert!(serde_json::to_value(&map).is_err());
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            "[a-e]{1,3}",
            Just("entry_hash".to_string()),
            Just("é".to_string()),
            Just("a\"b".to_string()),
            Just("\u{1}".to_string()),
            Just("Z".to_string()),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_value_is_written_as_the_value_walk_writes_it(value in json_value()) {
            prop_assert_eq!(direct(&value), canonical(&value));
        }
    }
}
