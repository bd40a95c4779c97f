//! Compact JSON text of a type with a derived `serde::Serialize`, in the field order it declares,
//! as serde_json's `to_string` wrote it (strings escaped by the tree's writer, `json_tree`).
//! Floats are not written: none of the types written here has one, and a tree's numbers are
//! written as they were read. A map's keys must be text (or integers, written quoted).

use crate::json_tree::{write_str, Error, Number, Value};
use serde::ser::{self, Error as _, Serialize};

/// The compact JSON text of `value`.
pub fn to_text<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut out = String::new();
    value.serialize(Writer { out: &mut out })?;
    Ok(out)
}

/// `value` as a tree: its text read back (object keys then sorted, as in every tree).
pub fn to_value<T: Serialize>(value: T) -> Result<Value, Error> {
    crate::json_tree::parse(&to_text(&value)?)
}

/// The name under which a tree's number that is not a 64-bit integer passes its text to a
/// serializer (as a newtype struct): this writer writes the text as it is; another serializer
/// writes a string.
pub(crate) const NUMBER_TEXT: &str = "$sema::json::number";

struct Writer<'a> {
    out: &'a mut String,
}

/// An array or object being written: whether an element or entry has been yet, and how it ends.
struct Compound<'a> {
    out: &'a mut String,
    first: bool,
    /// What closes it: `]`, `}`, or `]}`/`}}` for a variant's content.
    close: &'static str,
}

impl Compound<'_> {
    fn comma(&mut self) {
        if !std::mem::replace(&mut self.first, false) {
            self.out.push(',');
        }
    }

    fn key(&mut self, key: &str) {
        self.comma();
        write_str(key, self.out);
        self.out.push(':');
    }
}

/// The serializer's integer methods: each writes its digits.
macro_rules! integers {
    ($($method:ident : $t:ty),*) => {$(
        fn $method(self, v: $t) -> Result<(), Error> {
            Value::from(v).write(self.out);
            Ok(())
        }
    )*};
}

impl<'a> Writer<'a> {
    /// A variant with content: `{"name":` and the content opened with `open`, to be closed by
    /// `close` (the content's end and the object's).
    fn variant(self, name: &str, open: &str, close: &'static str) -> Compound<'a> {
        self.out.push('{');
        write_str(name, self.out);
        self.out.push(':');
        self.out.push_str(open);
        Compound {
            out: self.out,
            first: true,
            close,
        }
    }
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }

    integers!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64
    );

    fn serialize_f32(self, _: f32) -> Result<(), Error> {
        Err(Error::custom("a float is not written"))
    }

    fn serialize_f64(self, _: f64) -> Result<(), Error> {
        Err(Error::custom("a float is not written"))
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(v.encode_utf8(&mut [0; 4]), self.out);
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(v, self.out);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        Value::from(v.to_vec()).write(self.out);
        Ok(())
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.out.push_str("null");
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if name == NUMBER_TEXT {
            // The text of a number read from JSON: written as it is (a string to any other).
            let mut text = String::new();
            value.serialize(Writer { out: &mut text })?;
            let raw = text.trim_matches('"');
            self.out.push_str(raw);
            return Ok(());
        }
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push('{');
        write_str(variant, self.out);
        self.out.push(':');
        value.serialize(Writer {
            out: &mut *self.out,
        })?;
        self.out.push('}');
        Ok(())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        self.out.push('[');
        Ok(Compound {
            out: self.out,
            first: true,
            close: "]",
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        Ok(self.variant(variant, "[", "]}"))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        self.out.push('{');
        Ok(Compound {
            out: self.out,
            first: true,
            close: "}",
        })
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, Error> {
        self.serialize_map(None)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        Ok(self.variant(variant, "{", "}}"))
    }
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(Writer {
            out: &mut *self.out,
        })
    }

    fn end(self) -> Result<(), Error> {
        self.out.push_str(self.close);
        Ok(())
    }
}

/// The compound traits whose elements are values in order (`[…]`): each element is
/// [`Compound::element`].
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Error;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }

            fn end(self) -> Result<(), Error> {
                Compound::end(self)
            }
        }
    )*};
}
elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        let mut text = String::new();
        key.serialize(Writer { out: &mut text })?;
        self.comma();
        if text.starts_with('"') {
            self.out.push_str(&text);
        } else if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            // An integer key, quoted (as serde_json writes one).
            write_str(&text, self.out);
        } else {
            return Err(Error::custom("key must be a string"));
        }
        self.out.push(':');
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Writer {
            out: &mut *self.out,
        })
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

/// The compound traits whose entries are named fields (`{…}`).
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Error;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.key(key);
                value.serialize(Writer { out: &mut *self.out })
            }

            fn end(self) -> Result<(), Error> {
                Compound::end(self)
            }
        }
    )*};
}
fields!(SerializeStruct, SerializeStructVariant);

impl Serialize for Value {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use ser::{SerializeMap, SerializeSeq};
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => n.serialize(s),
            Value::String(t) => s.serialize_str(t),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl Serialize for Number {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.as_u64(), self.as_i64(), self.other()) {
            (Some(u), _, _) => s.serialize_u64(u),
            (_, Some(i), _) => s.serialize_i64(i),
            (_, _, Some(text)) => s.serialize_newtype_struct(NUMBER_TEXT, text),
            _ => s.serialize_unit(),
        }
    }
}

/// Reads a tree from any serde deserializer (for the derived readers the tests hold ours to).
/// A float becomes a number of its shortest text.
impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        struct Tree;
        impl<'de> serde::de::Visitor<'de> for Tree {
            type Value = Value;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any valid JSON value")
            }

            fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }

            fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
                Ok(Value::from(v))
            }

            fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
                Ok(Value::from(v))
            }

            // Not in the Worker's build, which formats no float (serde's default refuses one).
            #[cfg(not(target_arch = "wasm32"))]
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
                let text = format!("{v:?}");
                crate::json_tree::parse(&text)
                    .map_err(|_| E::custom(format_args!("not a JSON number: {text}")))
            }

            fn visit_str<E>(self, v: &str) -> Result<Value, E> {
                Ok(Value::from(v))
            }

            fn visit_string<E>(self, v: String) -> Result<Value, E> {
                Ok(Value::String(v))
            }

            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }

            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }

            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                <Value as serde::Deserialize>::deserialize(d)
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
                let mut items = Vec::new();
                while let Some(v) = a.next_element()? {
                    items.push(v);
                }
                Ok(Value::Array(items))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
                let mut m = crate::json_tree::Map::new();
                while let Some((k, v)) = a.next_entry::<String, Value>()? {
                    m.insert(k, v);
                }
                Ok(Value::Object(m))
            }
        }
        d.deserialize_any(Tree)
    }
}

impl<'de> serde::Deserialize<'de> for crate::json_tree::Map {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match <Value as serde::Deserialize>::deserialize(d)? {
            Value::Object(m) => Ok(m),
            _ => Err(serde::de::Error::custom("expected an object")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Record {
        zeta: u32,
        alpha_beta: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        tree: Value,
        kinds: Vec<Kind>,
        signed: i64,
        map: std::collections::BTreeMap<String, bool>,
        pair: (u8, &'static str),
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Plain,
        Wrapped(u8),
        Named { inner: bool },
        Tuple(u8, u8),
    }

    #[test]
    fn a_derived_type_is_written_as_serde_json_writes_it_in_declaration_order() {
        let r = Record {
            zeta: 1,
            alpha_beta: Some("a\"b\n".into()),
            skipped: None,
            tree: crate::json_tree::parse(r#"{"b":[1,-2,"x"],"a":null}"#).unwrap(),
            kinds: vec![
                Kind::Plain,
                Kind::Wrapped(3),
                Kind::Named { inner: true },
                Kind::Tuple(1, 2),
            ],
            signed: -5,
            map: [("k".to_owned(), true)].into_iter().collect(),
            pair: (7, "seven"),
        };
        assert_eq!(to_text(&r).unwrap(), serde_json::to_string(&r).unwrap());
        assert_eq!(to_text(&None::<u8>).unwrap(), "null");
        assert_eq!(to_text(&[1u8, 2]).unwrap(), "[1,2]");
    }

    #[test]
    fn a_number_read_as_text_is_written_as_it_was_read() {
        let v =
            crate::json_tree::parse(r#"{"f":1.50,"e":-2E+3,"big":123456789012345678901234567890}"#)
                .unwrap();
        assert_eq!(
            to_text(&v).unwrap(),
            r#"{"big":123456789012345678901234567890,"e":-2E+3,"f":1.50}"#
        );
        assert_eq!(to_text(&v).unwrap(), v.text());
    }

    #[test]
    fn floats_and_keys_that_are_not_text_are_refused_not_guessed() {
        assert!(to_text(&1.5f64).is_err());
        let mut m = std::collections::BTreeMap::new();
        m.insert(vec![1u8], 1u8);
        assert!(to_text(&m).is_err());
        let mut ints = std::collections::BTreeMap::new();
        ints.insert(-3i32, "x");
        assert_eq!(
            to_text(&ints).unwrap(),
            serde_json::to_string(&ints).unwrap()
        );
    }

    #[test]
    fn a_tree_read_through_serde_is_the_tree_parsed() {
        let text = r#"{"a":[1,-2,{"b":"c"}],"d":true,"e":null}"#;
        let through: Value = serde_json::from_str(text).unwrap();
        assert_eq!(through, crate::json_tree::parse(text).unwrap());
    }
}
