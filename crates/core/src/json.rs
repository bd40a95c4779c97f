//! Typed reads of JSON text through one text parser.
//!
//! `serde_json::from_str::<T>` compiles serde_json's text parser once per type `T` it reads; across
//! the objects' protocols (since written in `object_codec`'s text), their replies and the state they
//! store, those copies were about 200 KB of the Worker's wasm (about a seventh of it). [`from_text`]
//! parses the text into a [`Value`] (the core's tree, `json_tree`: one parser for the whole
//! program) and reads `T` from that tree. The detour builds one tree per read: a few hundred bytes for a stored state or a
//! request body. Duplicate keys in an object are taken as the last one rather than refused, so the
//! one configuration that must refuse them (the token table) scans its text for them first.
//!
//! What the Worker reads from a tree it reads by [`FromTree`]: a loop over the object's entries per
//! type, declared with [`tree_struct!`](crate::tree_struct) beside the type's serde derive. The
//! derive stays the reference: [`serde_from_text`] reads through it ([`Tree`], a serde deserializer
//! over a borrowed tree that takes a struct only from an object), and a test holds every
//! [`FromTree`] reader to it, value for value and error for error. serde's tree readers compiled a
//! field visitor, a map visitor and a value seed per field type into every type (and serde_json's
//! own, an array path and a second, owned, copy of each); the derived readers were about 14 KB of
//! the gzipped module.

pub use crate::json_tree::{parse, Error, Map, Number, Quoted, ToTree, Value};
pub use crate::json_write::{to_text, to_value};
use serde::de::{
    value::BorrowedStrDeserializer, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess,
    Error as _, Expected, MapAccess, SeqAccess, Unexpected, VariantAccess, Visitor,
};

/// The compact JSON text of a tree ([`Value::text`]), under the name the program calls it by.
pub trait JsonText {
    fn json_text(&self) -> String;
}

impl JsonText for Value {
    fn json_text(&self) -> String {
        self.text()
    }
}

/// Reads a `T` from JSON text. Errors are worded as serde_json's were: a syntax error names its
/// line and column, a shape error the field (without a position).
pub fn from_text<T: FromTree>(text: &str) -> Result<T, Error> {
    T::from_tree(&parse(text)?)
}

/// [`from_text`] through serde (`T`'s derived `Deserialize` reading a [`Tree`]): the reference
/// [`FromTree`]'s readers are held to (`tests`), and the reader of types that have no other.
pub fn serde_from_text<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    T::deserialize(Tree(&parse(text)?))
}

/// `T` read from a tree through its derived serde reader ([`Tree`]), as [`serde_from_text`].
pub fn serde_from_value<T: DeserializeOwned>(v: Value) -> Result<T, Error> {
    T::deserialize(Tree(&v))
}

/// A type read from a parsed tree by code of its own, not serde's: what the Worker reads (request
/// bodies, runner frames, the objects' stored state) implements it with
/// [`tree_struct!`](crate::tree_struct) or [`tree_enum!`](crate::tree_enum). serde's derived
/// readers, even through [`Tree`], compiled a field visitor, a map visitor and a value seed per
/// field type into every type (about 14 KB of the gzipped module); these are a loop over the
/// object's entries. They answer exactly as the derived reader of the same declaration does: the
/// same value, or the same first error in the same words (the object's entries are read in order,
/// an unknown field refused where it stands, the missing ones named after; a test holds each type
/// to its derived reader over a corpus of misfits).
pub trait FromTree: Sized {
    fn from_tree(v: &Value) -> Result<Self, Error>;

    /// The value of a field of this type that its object leaves out, when the declaration gives it
    /// no default: an `Option` is `None` (as serde has it), anything else is missing.
    fn missing(field: &'static str) -> Result<Self, Error> {
        Err(Error::missing_field(field))
    }
}

impl FromTree for String {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        match v {
            Value::String(s) => Ok(s.clone()),
            other => Err(invalid_type(other, &"a string")),
        }
    }
}

impl FromTree for bool {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        match v {
            Value::Bool(b) => Ok(*b),
            other => Err(invalid_type(other, &"a boolean")),
        }
    }
}

/// An integer of a tree, as serde's primitive visitors take one: the value, or why not (`what`:
/// the type's name, serde's expectation).
fn integer(v: &Value, what: &'static str) -> Result<Result<u64, i64>, Error> {
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Ok(Ok(u)),
            (None, Some(i)) => Ok(Err(i)),
            _ => Err(invalid_type(v, &what)),
        },
        other => Err(invalid_type(other, &what)),
    }
}

/// An unsigned integer of at most `max`.
fn unsigned(v: &Value, max: u64, what: &'static str) -> Result<u64, Error> {
    match integer(v, what)? {
        Ok(u) if u <= max => Ok(u),
        Ok(u) => Err(Error::invalid_value(Unexpected::Unsigned(u), &what)),
        Err(i) => Err(Error::invalid_value(Unexpected::Signed(i), &what)),
    }
}

impl FromTree for i64 {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        match integer(v, "i64")? {
            Ok(u) => {
                i64::try_from(u).map_err(|_| Error::invalid_value(Unexpected::Unsigned(u), &"i64"))
            }
            Err(i) => Ok(i),
        }
    }
}

impl FromTree for u64 {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        unsigned(v, u64::MAX, "u64")
    }
}

impl FromTree for u16 {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        unsigned(v, u16::MAX.into(), "u16").map(|u| u as u16)
    }
}

impl FromTree for Value {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        Ok(v.clone())
    }
}

impl<T: FromTree> FromTree for Option<T> {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        match v {
            Value::Null => Ok(None),
            some => T::from_tree(some).map(Some),
        }
    }

    fn missing(_: &'static str) -> Result<Self, Error> {
        Ok(None)
    }
}

impl<T: FromTree> FromTree for Vec<T> {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        match v {
            Value::Array(items) => items.iter().map(T::from_tree).collect(),
            other => Err(invalid_type(other, &"a sequence")),
        }
    }
}

impl<A: FromTree, B: FromTree> FromTree for (A, B) {
    fn from_tree(v: &Value) -> Result<Self, Error> {
        const WHAT: &str = "a tuple of size 2";
        match v {
            Value::Array(items) => match items.as_slice() {
                [a, b] => Ok((A::from_tree(a)?, B::from_tree(b)?)),
                [] => Err(Error::invalid_length(0, &WHAT)),
                [a] => {
                    A::from_tree(a)?;
                    Err(Error::invalid_length(1, &WHAT))
                }
                [a, b, ..] => {
                    A::from_tree(a)?;
                    B::from_tree(b)?;
                    // As `Tree` counts: the elements read before the surplus was found.
                    Err(Error::invalid_length(2, &"fewer elements in the array"))
                }
            },
            other => Err(invalid_type(other, &WHAT)),
        }
    }
}

/// The entries of the object a struct is read from (`what`: serde's expectation, `struct Name`).
pub fn object<'a>(v: &'a Value, what: &'static str) -> Result<&'a Map, Error> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(invalid_type(other, &what)),
    }
}

/// A field the declaration does not name, in a struct that refuses them.
pub fn unknown_field(key: &str, fields: &'static [&'static str]) -> Error {
    Error::unknown_field(key, fields)
}

/// An enum as serde reads one from a tree: a string names a variant without content, an object
/// of one key a variant and its content.
fn enum_parts(v: &Value) -> Result<(&str, Option<&Value>), Error> {
    match v {
        Value::String(s) => Ok((s.as_str(), None)),
        Value::Object(m) => match (m.iter().next(), m.len()) {
            (Some((k, v)), 1) => Ok((k.as_str(), Some(v))),
            _ => Err(Error::invalid_value(
                Unexpected::Map,
                &"an object with one key",
            )),
        },
        other => Err(invalid_type(other, &"a string or an object")),
    }
}

/// The variant name of a unit-only enum written as a string (or as an object of one key whose
/// value is null), as serde reads one; `variants` answer an unknown name.
pub fn unit_variant(v: &Value, variants: &'static [&'static str]) -> Result<usize, Error> {
    let (name, value) = enum_parts(v)?;
    let at = variants
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| Error::unknown_variant(name, variants))?;
    match value {
        None | Some(Value::Null) => Ok(at),
        Some(other) => Err(invalid_type(other, &"a unit variant")),
    }
}

/// The loop of every struct's reader ([`tree_struct!`](crate::tree_struct)): the entries of the
/// object `v` in order, each key looked up in `names` and its value handed to `field` with the
/// key's place there; a key `names` lacks is refused where it stands when `strict` (serde's
/// `deny_unknown_fields`), else skipped. The first misfit answers, as in serde's derived reader.
/// One loop for all types: a loop with a match of its own per type was most of each reader.
pub fn read_fields(
    v: &Value,
    what: &'static str,
    names: &'static [&'static str],
    strict: bool,
    field: &mut dyn FnMut(usize, &Value) -> Result<(), Error>,
) -> Result<(), Error> {
    for (key, value) in object(v, what)? {
        match names.iter().position(|n| *n == key.as_str()) {
            Some(at) => field(at, value)?,
            None if strict => return Err(unknown_field(key, names)),
            None => {}
        }
    }
    Ok(())
}

/// [`FromTree`] for a struct: its fields in declaration order, each with the name it has in JSON,
/// and what an absent one reads as (`= default`: `Default::default()`; `= (expr)`: the value of
/// `expr`; else [`FromTree::missing`]), then after `;` the fields serde skips (their default).
/// `strict` refuses a field the list does not name (serde's
/// `deny_unknown_fields`); otherwise such a field is skipped. The entries are read in the object's
/// order and the first misfit answers, as serde's derived reader does.
#[macro_export]
macro_rules! tree_struct {
    (@absent $name:literal) => { $crate::json::FromTree::missing($name)? };
    (@absent $name:literal default) => { ::core::default::Default::default() };
    (@absent $name:literal ($e:expr)) => { $e };
    (@strict strict) => { true };
    (@strict lenient) => { false };
    ($ty:ident $mode:ident {
        $( $field:ident : $name:literal $( = $absent:tt )? ),* $(,)?
        $( ; $( $skip:ident ),* )?
    }) => {
        impl $crate::json::FromTree for $ty {
            fn from_tree(v: &$crate::json::Value) -> Result<Self, $crate::json::Error> {
                const FIELDS: &[&str] = &[$($name),*];
                /// Each field's place in `FIELDS`.
                #[allow(non_camel_case_types)]
                enum At { $( $field, )* }
                $( let mut $field = None; )*
                $crate::json::read_fields(
                    v,
                    concat!("struct ", stringify!($ty)),
                    FIELDS,
                    $crate::tree_struct!(@strict $mode),
                    &mut |at, value| {
                        $( if at == At::$field as usize {
                            $field = Some($crate::json::FromTree::from_tree(value)?);
                        } )*
                        Ok(())
                    },
                )?;
                Ok(Self {
                    $( $field: match $field {
                        Some(v) => v,
                        None => $crate::tree_struct!(@absent $name $($absent)?),
                    }, )*
                    $( $( $skip: ::core::default::Default::default(), )* )?
                })
            }
        }
    };
}

/// [`FromTree`] for an enum of unit variants, each with the name it has in JSON.
#[macro_export]
macro_rules! tree_enum {
    ($ty:ident { $( $var:ident = $name:literal ),* $(,)? }) => {
        impl $crate::json::FromTree for $ty {
            fn from_tree(v: &$crate::json::Value) -> Result<Self, $crate::json::Error> {
                const VARIANTS: &[&str] = &[$($name),*];
                const ALL: &[$ty] = &[$($ty::$var),*];
                $crate::json::unit_variant(v, VARIANTS).map(|at| ALL[at])
            }
        }
    };
}

/// A parsed JSON tree as a serde deserializer: objects read as structs and maps, arrays as
/// sequences and tuples, an object with one key (or a string) as an enum variant, as serde_json
/// reads them, except that a struct is never read from an array. Strings are copied out of the
/// tree, which the caller keeps.
#[derive(Clone, Copy)]
pub struct Tree<'a>(pub &'a Value);

/// A shape error: `v` where `expected` was wanted, in serde's words.
fn invalid_type(v: &Value, expected: &dyn Expected) -> Error {
    let unexpected = match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.other()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (_, Some(i), _) => Unexpected::Signed(i),
            // Kept as written (serde says a float in its own digits).
            (_, _, text) => {
                return Error::custom(format_args!(
                    "invalid type: floating point `{}`, expected {expected}",
                    text.unwrap_or_default()
                ))
            }
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    };
    Error::invalid_type(unexpected, expected)
}

impl<'a> Tree<'a> {
    fn any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.other()) {
                (Some(u), _, _) => visitor.visit_u64(u),
                (_, Some(i), _) => visitor.visit_i64(i),
                (_, _, text) => {
                    // A visitor that takes no float refuses it naming the number as written, as
                    // the program's own readers do (`invalid_type`): serde's words for a float
                    // carry no digits here (`json_tree::InJson`).
                    let refused = invalid_type(self.0, &visitor).to_string();
                    let float = text.unwrap_or_default().parse().unwrap_or(f64::NAN);
                    visitor.visit_f64(float).map_err(|e: Error| {
                        if e.to_string().starts_with("invalid type: floating point,") {
                            Error::custom(refused)
                        } else {
                            e
                        }
                    })
                }
            },
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(_) => self.seq(visitor),
            Value::Object(_) => self.map(visitor),
        }
    }

    fn map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        let Value::Object(m) = self.0 else {
            return Err(invalid_type(self.0, &visitor));
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
            return Err(invalid_type(self.0, &visitor));
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

/// The scalar reads: what the tree holds, whatever was asked for (the visitor refuses a misfit).
macro_rules! by_value {
    ($($name:ident),*) => {$(
        fn $name<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
            self.any(visitor)
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
        self.any(visitor)
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
        let (variant, value) = enum_parts(self.0)?;
        visitor.visit_enum(Variant { variant, value })
    }
}

/// An object's entries, each value read through [`Tree`].
struct Entries<'a> {
    iter: crate::json_tree::Iter<'a>,
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
            Some(other) => Err(invalid_type(other, &"a unit variant")),
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

/// Holds a [`FromTree`] reader to `T`'s derived serde reader (through [`Tree`]): on `valid` and on
/// every misfit made from it (each field left out, each field and the whole set to each odd value,
/// a field no declaration names added, and so on inside every object or first array element it
/// holds), both give the same value or the same error, word for word.
#[cfg(test)]
pub(crate) fn assert_reads_as_serde<T>(valid: Value)
where
    T: FromTree + DeserializeOwned + std::fmt::Debug,
{
    let odd: Vec<Value> = serde_json::from_str(
        r#"[null, true, 0, -1, 7, 65536, 5000000000, -5000000000, 18446744073709551615, 1.5,
            "", "x", "ready", "client", [], ["a"], ["a", "b"], ["a", "b", "c"], {},
            {"client": null}, {"client": 1}, {"a": 1, "b": 2}]"#,
    )
    .unwrap();
    /// Every misfit of `v`, with `put` placing a variant of `v` back in the whole.
    fn misfits(v: &Value, odd: &[Value], put: &dyn Fn(Value) -> Value, out: &mut Vec<Value>) {
        for o in odd {
            out.push(put(o.clone()));
        }
        match v {
            Value::Object(m) => {
                let mut extra = m.clone();
                extra.insert("zz_unknown".into(), Value::Bool(true));
                out.push(put(Value::Object(extra)));
                let mut early = m.clone();
                early.insert("a_unknown".into(), Value::Bool(true));
                out.push(put(Value::Object(early)));
                for k in m.keys() {
                    let mut without = m.clone();
                    without.remove(k);
                    out.push(put(Value::Object(without)));
                    let field = |x: Value| {
                        let mut with = m.clone();
                        with.insert(k.clone(), x);
                        put(Value::Object(with))
                    };
                    misfits(&m[k], odd, &field, out);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let first = |x: Value| {
                    let mut with = items.clone();
                    with[0] = x;
                    put(Value::Array(with))
                };
                misfits(&items[0], odd, &first, out);
            }
            _ => {}
        }
    }
    let mut cases = vec![valid.clone()];
    misfits(&valid, &odd, &|x| x, &mut cases);
    let mut errors = 0;
    for v in &cases {
        let ours = T::from_tree(v)
            .map(|t| format!("{t:?}"))
            .map_err(|e| e.to_string());
        let serde = T::deserialize(Tree(v))
            .map(|t| format!("{t:?}"))
            .map_err(|e| e.to_string());
        assert_eq!(ours, serde, "{}: {v}", std::any::type_name::<T>());
        errors += usize::from(ours.is_err());
    }
    assert!(T::from_tree(&valid).is_ok(), "the valid example reads");
    assert!(errors > cases.len() / 2, "the corpus is mostly misfits");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_variants_missing_fields_and_broken_text_are_errors_not_defaults() {
        assert!(serde_from_text::<Shape>(r#"{"no_such_shape":{}}"#).is_err());
        let missing = serde_from_text::<Shape>(r#"{"named":{}}"#).unwrap_err();
        assert!(missing.to_string().contains("inner"), "{missing}");
        let broken = serde_from_text::<Shape>(r#"{"named":"#).unwrap_err();
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
        let read: Outer = serde_from_text(text).unwrap();
        let direct: Outer = serde_json::from_str(text).unwrap();
        assert_eq!(read, direct);
        assert_eq!(read.shapes[1], Shape::Wrapped(7));
        assert_eq!(read.any, crate::json!([1, {"k": "v"}]));
    }

    #[test]
    fn a_struct_is_never_read_from_an_array() {
        let e = serde_from_text::<Inner>(r#"[1, ["a"]]"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("invalid type: sequence, expected struct Inner"),
            "{e}"
        );
        assert!(
            serde_json::from_str::<Inner>(r#"[1, ["a"]]"#).is_ok(),
            "serde_json's own reader takes it"
        );
        let e = serde_from_text::<Outer>(
            r#"{"inner":[1,[]],"shapes":[],"by_name":{},"maybe":null,"any":0}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("expected struct Inner"), "{e}");
    }

    #[test]
    fn shape_errors_name_what_was_found_and_what_was_expected() {
        let e = |text: &str| serde_from_text::<Shape>(text).unwrap_err().to_string();
        assert!(e(r#"{"empty":1}"#).contains("expected a unit variant"));
        assert!(e(r#""wrapped""#).contains("expected a newtype variant"));
        assert!(e(r#"{"pair":[true,1.5,3]}"#).contains("fewer elements in the array"));
        assert!(e(r#"{"pair":[true]}"#).contains("invalid length 1"));
        assert!(e(r#"{"empty":null,"wrapped":1}"#).contains("an object with one key"));
        assert!(e("7").contains("invalid type: integer `7`, expected a string or an object"));
        assert!(e(r#"{"nope":1}"#).contains("unknown variant `nope`"));
        let e = serde_from_text::<Inner>(r#"{"n":"x","tags":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r#"invalid type: string "x", expected i64"#),
            "{e}"
        );
        let e = serde_from_text::<Inner>(r#"{"tags":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `n`"), "{e}");
    }

    #[test]
    fn every_reader_of_the_worker_answers_as_serde_s_derived_reader_does() {
        use crate::json;
        use crate::{admission, auth, dispatch, gate, idempotency, leader_wire, runner_wire};
        use crate::{stream_ticket, wire};
        let binding = json!({"scoped_key": "k", "fingerprint": "f", "task_id": "t",
            "response_status": 202, "response_body": "{}"});
        let input = json!({"session_id": "s", "task_id": "t", "client_task_id": false,
            "owner": "o", "objective": "x", "meta": "{}", "idempotency": ["k", "f"],
            "key_unread": true, "queue": "q"});
        let claim = json!({"task_id": "t", "owner": null, "status": "running",
            "gate_kind": "approval", "idempotency": binding, "recheck_at": 5});
        assert_reads_as_serde::<wire::SubmitRunBody>(
            json!({"sessionId": "s", "objective": "o", "taskId": "t", "meta": {"a": 1}, "queue": "q"}),
        );
        assert_reads_as_serde::<leader_wire::SubmitLeaderBody>(json!({"objective": "o",
            "subtasks": [{"objective": "a", "meta": {}}], "maxConcurrency": 2, "deadlineMs": 9}));
        assert_reads_as_serde::<runner_wire::LeaseBody>(
            json!({"runnerId": "r", "waitMs": 5, "queue": "q"}),
        );
        assert_reads_as_serde::<runner_wire::HeartbeatBody>(
            json!({"runnerId": "r", "leaseEpoch": 1}),
        );
        assert_reads_as_serde::<runner_wire::EventsBody>(json!({"runnerId": "r", "leaseEpoch": 1,
            "events": [{"type": "text", "data": {"x": 1}, "eventId": "e"}], "sessionId": "s"}));
        assert_reads_as_serde::<runner_wire::FinishBody>(json!({"runnerId": "r", "leaseEpoch": 1,
            "status": "completed", "result": {"ok": true}, "error": "e", "errorCode": "c",
            "sessionId": "s"}));
        assert_reads_as_serde::<runner_wire::SteerBody>(json!({"message": "m"}));
        assert_reads_as_serde::<runner_wire::TaskBody>(json!({"sessionId": "s", "objective": "o",
            "taskId": "t", "meta": {}, "stream": true, "waitMs": 3, "queue": "q"}));
        assert_reads_as_serde::<gate::ParkBody>(json!({"runnerId": "r", "leaseEpoch": 1,
            "gate": {"kind": "approval", "card": {"text": "ok?"}}, "expiresInSec": 60}));
        assert_reads_as_serde::<gate::DecideBody>(
            json!({"decision": "approve", "reason": "r", "feedback": "f"}),
        );
        assert_reads_as_serde::<dispatch::SocketNote>(json!({"queue": "q", "runnerId": "r",
            "key": "k", "ready": true, "since": 4}));
        assert_reads_as_serde::<dispatch::RunnerFrame>(json!({"type": "ready", "other": 1}));
        assert_reads_as_serde::<stream_ticket::TicketBook>(json!({"entries": [{"digest": "d",
            "task_id": "t", "principal": "p", "role": "operator", "expires_at": 9}]}));
        assert_reads_as_serde::<auth::Role>(json!("runner"));
        assert_reads_as_serde::<idempotency::IdempotencyBinding>(binding.clone());
        assert_reads_as_serde::<admission::SessionState>(json!({"owner": {"id": "o"},
            "claim": claim, "pending": {"input": input, "body": "{}", "at": 3,
            "instance_id": "i"}, "confirmed": true}));
        assert_reads_as_serde::<admission::AdmitInput>(input.clone());
        assert_reads_as_serde::<admission::Claim>(claim.clone());
    }
}
