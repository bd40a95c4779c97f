//! Typed reads of JSON text through one text parser.
//!
//! `serde_json::from_str::<T>` compiles serde_json's text parser once per type `T` it reads; across
//! the objects' protocols (since written in `object_codec`'s text), their replies and the state they
//! store, those copies were about 200 KB of the Worker's wasm (about a seventh of it). [`from_text`]
//! parses the text into a `serde_json::Value` (one parser for the whole program) and reads `T` from
//! that tree, whose per-type code is a fraction of the size. The detour builds one tree per read: a
//! few hundred bytes for a stored state or a request body.
//! Reads of many rows (D1's results) keep the direct parser. Duplicate keys in an object are taken
//! as the last one rather than refused, so a configuration that must be strict (the token table)
//! keeps `serde_json::from_str`.
//!
//! Every typed read of a tree goes through [`Tree`], which reads a borrowed tree and takes a struct
//! only from a JSON object. serde_json's tree readers also take one from an array, field by field
//! in order, which compiled an array path no message of ours uses into every derived type, and
//! its owned and borrowed readers compiled each type twice (together about 65 KB of the wasm);
//! through [`Tree`] an array where a struct belongs is a shape error.

use serde::de::{
    value::BorrowedStrDeserializer, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess,
    Error as _, MapAccess, SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde_json::{Error, Value};

/// The compact JSON text of a tree, written by serde_json's byte writer (`to_string`). The tree's
/// own `Display` (`.to_string()`, `{}`) goes through the formatter's text writer, a call per piece,
/// and compiles a second writer (the pretty one, for `{:#}`) into the module: use this instead.
pub trait JsonText {
    fn json_text(&self) -> String;
}

impl JsonText for Value {
    fn json_text(&self) -> String {
        // A tree always serialises (its keys are text): the default is never taken.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Reads a `T` from JSON text. Errors are serde_json's: a syntax error names its line and column,
/// a shape error the field (without a position).
pub fn from_text<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    T::deserialize(Tree(&serde_json::from_str::<Value>(text)?))
}

/// A parsed JSON tree as a serde deserializer: objects read as structs and maps, arrays as
/// sequences and tuples, an object with one key (or a string) as an enum variant, as serde_json
/// reads them, except that a struct is never read from an array. Strings are copied out of the
/// tree, which the caller keeps.
#[derive(Clone, Copy)]
pub struct Tree<'a>(pub &'a Value);

/// What a value is, for a shape error.
fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (_, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

impl<'a> Tree<'a> {
    fn map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let Value::Object(m) = self.0 else {
            return Err(Error::invalid_type(unexpected(self.0), &visitor));
        };
        let mut entries = Entries {
            iter: m.iter(),
            value: None,
        };
        let out = visitor.visit_map(&mut entries)?;
        match entries.iter.len() {
            0 => Ok(out),
            left => Err(Error::invalid_length(
                m.len() - left,
                &"fewer entries in the object",
            )),
        }
    }

    fn seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let Value::Array(a) = self.0 else {
            return Err(Error::invalid_type(unexpected(self.0), &visitor));
        };
        let mut items = Items(a.iter());
        let out = visitor.visit_seq(&mut items)?;
        match items.0.len() {
            0 => Ok(out),
            left => Err(Error::invalid_length(
                a.len() - left,
                &"fewer elements in the array",
            )),
        }
    }
}

/// The scalar reads: the tree's own (`&Value`'s deserializer).
macro_rules! by_value {
    ($($name:ident),*) => {$(
        fn $name<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
            self.0.$name(visitor)
        }
    )*};
}

impl<'a> Deserializer<'a> for Tree<'a> {
    type Error = Error;

    by_value!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_identifier,
        deserialize_ignored_any
    );

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.seq(visitor)
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.map(visitor)
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.map(visitor)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let (variant, value) = match self.0 {
            Value::String(s) => (s.as_str(), None),
            Value::Object(m) => match (m.iter().next(), m.len()) {
                (Some((k, v)), 1) => (k.as_str(), Some(v)),
                _ => {
                    return Err(Error::invalid_value(
                        Unexpected::Map,
                        &"an object with one key",
                    ))
                }
            },
            other => {
                return Err(Error::invalid_type(
                    unexpected(other),
                    &"a string or an object",
                ))
            }
        };
        visitor.visit_enum(Variant { variant, value })
    }
}

/// An object's entries, each value read through [`Tree`].
struct Entries<'a> {
    iter: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'a> MapAccess<'a> for Entries<'a> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((k, v)) = self.iter.next() else {
            return Ok(None);
        };
        self.value = Some(v);
        seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'a>>(&mut self, seed: S) -> Result<S::Value, Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(Tree(v)),
            None => Err(Error::custom("a value was read before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// An array's elements, each read through [`Tree`].
struct Items<'a>(std::slice::Iter<'a, Value>);

impl<'a> SeqAccess<'a> for Items<'a> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'a>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        self.0.next().map(|v| seed.deserialize(Tree(v))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// An enum's variant name and, for a variant with content, the content.
struct Variant<'a> {
    variant: &'a str,
    value: Option<&'a Value>,
}

impl<'a> EnumAccess<'a> for Variant<'a> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'a>>(self, seed: S) -> Result<(S::Value, Self), Error> {
        let name = seed.deserialize(BorrowedStrDeserializer::<Error>::new(self.variant))?;
        Ok((name, self))
    }
}

impl<'a> VariantAccess<'a> for Variant<'a> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(Error::invalid_type(unexpected(other), &"a unit variant")),
        }
    }

    fn newtype_variant_seed<S: DeserializeSeed<'a>>(self, seed: S) -> Result<S::Value, Error> {
        match self.value {
            Some(v) => seed.deserialize(Tree(v)),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"a newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Some(v) => Tree(v).seq(visitor),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"a tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'a>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Some(v) => Tree(v).map(visitor),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"a struct variant",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_variants_missing_fields_and_broken_text_are_errors_not_defaults() {
        assert!(from_text::<Shape>(r#"{"no_such_shape":{}}"#).is_err());
        let missing = from_text::<Shape>(r#"{"named":{}}"#).unwrap_err();
        assert!(missing.to_string().contains("inner"), "{missing}");
        let broken = from_text::<Shape>(r#"{"named":"#).unwrap_err();
        assert!(broken.to_string().contains("line 1"), "{broken}");
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Inner {
        n: i64,
        tags: Vec<String>,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Empty,
        Wrapped(u64),
        Pair(bool, f64),
        Named { inner: Inner },
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Outer {
        inner: Inner,
        shapes: Vec<Shape>,
        by_name: std::collections::BTreeMap<String, Inner>,
        maybe: Option<Inner>,
        #[serde(default)]
        missing: Option<String>,
        any: Value,
    }

    #[test]
    fn a_tree_reads_what_serde_json_reads_from_objects_arrays_and_variants() {
        let text = r#"{"inner":{"n":-3,"tags":["a","b"]},
            "shapes":["empty",{"wrapped":7},{"pair":[true,1.5]},{"named":{"inner":{"n":1,"tags":[]}}}],
            "by_name":{"x":{"n":2,"tags":["c"]}},"maybe":null,"any":[1,{"k":"v"}],"ignored":{"a":[1]}}"#;
        let read: Outer = from_text(text).unwrap();
        let direct: Outer = serde_json::from_str(text).unwrap();
        assert_eq!(read, direct);
        assert_eq!(read.shapes[1], Shape::Wrapped(7));
        assert_eq!(read.any, serde_json::json!([1, {"k": "v"}]));
    }

    #[test]
    fn a_struct_is_never_read_from_an_array() {
        let e = from_text::<Inner>(r#"[1, ["a"]]"#).unwrap_err().to_string();
        assert!(
            e.contains("invalid type: sequence, expected struct Inner"),
            "{e}"
        );
        assert!(
            serde_json::from_str::<Inner>(r#"[1, ["a"]]"#).is_ok(),
            "serde_json's own reader takes it"
        );
        let e =
            from_text::<Outer>(r#"{"inner":[1,[]],"shapes":[],"by_name":{},"maybe":null,"any":0}"#)
                .unwrap_err()
                .to_string();
        assert!(e.contains("expected struct Inner"), "{e}");
    }

    #[test]
    fn shape_errors_name_what_was_found_and_what_was_expected() {
        let e = |text: &str| from_text::<Shape>(text).unwrap_err().to_string();
        assert!(e(r#"{"empty":1}"#).contains("expected a unit variant"));
        assert!(e(r#""wrapped""#).contains("expected a newtype variant"));
        assert!(e(r#"{"pair":[true,1.5,3]}"#).contains("fewer elements in the array"));
        assert!(e(r#"{"pair":[true]}"#).contains("invalid length 1"));
        assert!(e(r#"{"empty":null,"wrapped":1}"#).contains("an object with one key"));
        assert!(e("7").contains("invalid type: integer `7`, expected a string or an object"));
        assert!(e(r#"{"nope":1}"#).contains("unknown variant `nope`"));
        let e = from_text::<Inner>(r#"{"n":"x","tags":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r#"invalid type: string "x", expected i64"#),
            "{e}"
        );
        let e = from_text::<Inner>(r#"{"tags":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `n`"), "{e}");
    }
}
