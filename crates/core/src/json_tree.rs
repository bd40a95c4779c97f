//! The program's JSON tree, its text parser and its compact writer.
//!
//! [`Value`] is what serde_json's tree was here, with two differences of representation and none of
//! meaning for what the Worker reads:
//! - an object ([`Map`]) is one vector of entries kept sorted by key (serde_json's is a B-tree with
//!   the same order): written, its keys come out in the same order;
//! - a number is kept as an integer when it is one that fits (`u64`, or a negative `i64`), and
//!   otherwise as the text it was written with (a fraction, an exponent, `-0`, or an integer past
//!   64 bits). Nothing here reads a number as a float, so none is ever converted: a client's
//!   numbers are written back exactly as sent (serde_json rounded them through `f64`).
//!
//! [`parse`] takes what serde_json's `from_str` takes and refuses what it refuses, with the same
//! message at the same line and column (a test holds it to serde_json on a corpus of broken texts),
//! except that no number is out of range. A duplicate key in an object keeps its last value.
//! Nesting deeper than 127 arrays and objects is refused, as serde_json refuses it.

use crate::text_map::TextMap;
use std::fmt::{self, Write as _};

/// A JSON value.
#[derive(Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Map),
}

/// A JSON number: an integer that fits 64 bits, or the text of any other.
#[derive(Clone, PartialEq)]
pub struct Number(Num);

#[derive(Clone, PartialEq)]
enum Num {
    /// Zero or more.
    Pos(u64),
    /// Less than zero.
    Neg(i64),
    /// A fraction, an exponent, `-0` or an integer past 64 bits, as written (valid JSON).
    Text(Box<str>),
}

impl Number {
    pub fn as_u64(&self) -> Option<u64> {
        match self.0 {
            Num::Pos(u) => Some(u),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self.0 {
            Num::Pos(u) => i64::try_from(u).ok(),
            Num::Neg(i) => Some(i),
            Num::Text(_) => None,
        }
    }

    pub fn is_u64(&self) -> bool {
        self.as_u64().is_some()
    }

    pub fn is_i64(&self) -> bool {
        self.as_i64().is_some()
    }

    /// The number as a float (rounded; for tests and tools: the Worker reads no floats).
    pub fn as_f64(&self) -> Option<f64> {
        match &self.0 {
            Num::Pos(u) => Some(*u as f64),
            Num::Neg(i) => Some(*i as f64),
            Num::Text(t) => t.parse().ok(),
        }
    }

    /// The text of a number that is not a 64-bit integer (`None` for one that is).
    pub fn other(&self) -> Option<&str> {
        match &self.0 {
            Num::Text(t) => Some(t),
            _ => None,
        }
    }

    fn write(&self, out: &mut String) {
        match &self.0 {
            Num::Pos(u) => write_u64(*u, false, out),
            Num::Neg(i) => write_u64(i.unsigned_abs(), true, out),
            Num::Text(t) => out.push_str(t),
        }
    }
}

fn write_u64(n: u64, negative: bool, out: &mut String) {
    if negative {
        out.push('-');
    }
    write_digits(n, out);
}

/// Appends `n`'s decimal digits.
pub(crate) fn write_digits(mut n: u64, out: &mut String) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in &digits[at..] {
        out.push(char::from(*d));
    }
}

impl From<u64> for Number {
    fn from(u: u64) -> Self {
        Number(Num::Pos(u))
    }
}

impl From<i64> for Number {
    fn from(i: i64) -> Self {
        match u64::try_from(i) {
            Ok(u) => Number(Num::Pos(u)),
            Err(_) => Number(Num::Neg(i)),
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A JSON object: its entries sorted by key (byte order), each key once (the program's
/// [`TextMap`] of values).
#[derive(Clone, PartialEq, Default)]
pub struct Map(TextMap<Value>);

impl Map {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.0.get_mut(key)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        self.0.insert(key, value)
    }

    /// Sets `key` to `value`, dropping any value it had: what [`json!`](crate::json) writes for
    /// each key, one call rather than a key's copy and a drop inlined at every key.
    pub fn set(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_owned(), value);
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.entries().iter())
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.entries().iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.0.entries().iter().map(|(_, v)| v)
    }

    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.0.values_mut()
    }

    /// A map of entries in any order, a repeated key keeping its last value.
    fn from_entries(entries: Vec<(String, Value)>) -> Self {
        Map(TextMap::from_entries(entries))
    }
}

/// The entries of a [`Map`], in key order.
#[derive(Clone)]
pub struct Iter<'a>(std::slice::Iter<'a, (String, Value)>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a String, &'a Value);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_entries().into_iter()
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Map::from_entries(iter.into_iter().collect())
    }
}

impl Extend<(String, Value)> for Map {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

static NULL: Value = Value::Null;

impl std::ops::Index<&str> for Map {
    type Output = Value;

    /// The value at `key`, or null.
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

/// What indexes a [`Value`]: a key (of an object) or a position (in an array).
pub trait Key {
    fn get(self, v: &Value) -> Option<&Value>;
    fn get_mut(self, v: &mut Value) -> Option<&mut Value>;
}

impl Key for &str {
    fn get(self, v: &Value) -> Option<&Value> {
        v.as_object()?.get(self)
    }

    fn get_mut(self, v: &mut Value) -> Option<&mut Value> {
        v.as_object_mut()?.get_mut(self)
    }
}

impl Key for &String {
    fn get(self, v: &Value) -> Option<&Value> {
        Key::get(self.as_str(), v)
    }

    fn get_mut(self, v: &mut Value) -> Option<&mut Value> {
        Key::get_mut(self.as_str(), v)
    }
}

impl Key for usize {
    fn get(self, v: &Value) -> Option<&Value> {
        v.as_array()?.get(self)
    }

    fn get_mut(self, v: &mut Value) -> Option<&mut Value> {
        v.as_array_mut()?.get_mut(self)
    }
}

impl<K: Key> std::ops::Index<K> for Value {
    type Output = Value;

    /// The value at `key`, or null (for a missing key, a position past the end, or a value that
    /// is not an object or array).
    fn index(&self, key: K) -> &Value {
        key.get(self).unwrap_or(&NULL)
    }
}

impl std::ops::IndexMut<&str> for Value {
    /// The value at `key`, inserted as null if missing; a value that is not an object becomes an
    /// empty one first.
    fn index_mut(&mut self, key: &str) -> &mut Value {
        if !self.is_object() {
            *self = Value::Object(Map::new());
        }
        let Value::Object(m) = self else {
            unreachable!("made an object above")
        };
        m.0.get_or_insert_with(key, || Value::Null)
    }
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_boolean(&self) -> bool {
        matches!(self, Value::Bool(_))
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Value::Number(_))
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    pub fn is_u64(&self) -> bool {
        self.as_u64().is_some()
    }

    pub fn is_i64(&self) -> bool {
        self.as_i64().is_some()
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn get<K: Key>(&self, key: K) -> Option<&Value> {
        key.get(self)
    }

    pub fn get_mut<K: Key>(&mut self, key: K) -> Option<&mut Value> {
        key.get_mut(self)
    }

    /// The value at a JSON Pointer (RFC 6901: `/a/0/b`, `~1` for `/`, `~0` for `~`); the empty
    /// pointer is the value itself.
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut at = self;
        for token in rest.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            at = match at {
                Value::Object(m) => m.get(&token)?,
                Value::Array(a) => {
                    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
                    if !digits || (token.len() > 1 && token.starts_with('0')) {
                        return None;
                    }
                    a.get(token.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
        }
        Some(at)
    }

    /// The value, leaving null in its place.
    pub fn take(&mut self) -> Value {
        std::mem::take(self)
    }

    /// The compact JSON text of the value, appended to `out`: no whitespace, keys in the map's
    /// order, strings escaped as serde_json escapes them (`"`, `\`, and control characters; `\n`,
    /// `\t` and the like by name, the others as `\u00XX`; nothing else).
    pub fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => n.write(out),
            Value::String(s) => write_str(s, out),
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    /// The compact JSON text of the value (see [`Value::write`]).
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }
}

/// `s` as a JSON string (quoted and escaped as [`Value::write`] says), appended to `out`.
pub fn write_str(s: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

impl fmt::Display for Value {
    /// The compact text (as [`Value::text`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        Value::Object(self.clone()).write(&mut s);
        f.write_str(&s)
    }
}

// ---- Conversions -------------------------------------------------------------------------------

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::String(s.clone())
    }
}

impl From<std::borrow::Cow<'_, str>> for Value {
    fn from(s: std::borrow::Cow<'_, str>) -> Self {
        Value::String(s.into_owned())
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Self {
        Value::Number(n)
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Object(m)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Self {
        Value::Array(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A float by its shortest text (not finite: null). For tests and tools: the Worker makes none,
/// and its build has none (it formats no float, and its `Debug` writes nothing: `scripts/build`).
#[cfg(not(target_arch = "wasm32"))]
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        if !f.is_finite() {
            return Value::Null;
        }
        Value::Number(Number(Num::Text(format!("{f:?}").into())))
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl ToTree for f64 {
    fn to_tree(&self) -> Value {
        Value::from(*self)
    }
}

impl From<()> for Value {
    fn from(_: ()) -> Self {
        Value::Null
    }
}

macro_rules! from_unsigned {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Self {
                Value::Number(Number(Num::Pos(n as u64)))
            }
        }
    )*};
}
from_unsigned!(u8, u16, u32, u64, usize);

macro_rules! from_signed {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Self {
                Value::Number(Number::from(n as i64))
            }
        }
    )*};
}
from_signed!(i8, i16, i32, i64, isize);

impl<T: Into<Value>> FromIterator<T> for Value {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Value::Array(iter.into_iter().map(Into::into).collect())
    }
}

/// What [`json!`](crate::json) takes as a value: a copy of it as a tree. Implemented for
/// borrowed and owned text, numbers, booleans, trees, and options, vectors and slices of these.
pub trait ToTree {
    fn to_tree(&self) -> Value;
}

impl ToTree for Value {
    fn to_tree(&self) -> Value {
        self.clone()
    }
}

impl ToTree for Map {
    fn to_tree(&self) -> Value {
        Value::Object(self.clone())
    }
}

impl ToTree for str {
    fn to_tree(&self) -> Value {
        Value::String(self.to_owned())
    }
}

impl ToTree for String {
    fn to_tree(&self) -> Value {
        Value::String(self.clone())
    }
}

impl ToTree for bool {
    fn to_tree(&self) -> Value {
        Value::Bool(*self)
    }
}

impl ToTree for Number {
    fn to_tree(&self) -> Value {
        Value::Number(self.clone())
    }
}

macro_rules! to_tree_by_from {
    ($($t:ty),*) => {$(
        impl ToTree for $t {
            fn to_tree(&self) -> Value {
                Value::from(*self)
            }
        }
    )*};
}
to_tree_by_from!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

impl<T: ToTree + ?Sized> ToTree for &T {
    fn to_tree(&self) -> Value {
        (**self).to_tree()
    }
}

impl<T: ToTree> ToTree for Option<T> {
    fn to_tree(&self) -> Value {
        self.as_ref().map_or(Value::Null, T::to_tree)
    }
}

impl<T: ToTree> ToTree for [T] {
    fn to_tree(&self) -> Value {
        Value::Array(self.iter().map(T::to_tree).collect())
    }
}

impl<T: ToTree> ToTree for Vec<T> {
    fn to_tree(&self) -> Value {
        self.as_slice().to_tree()
    }
}

impl<T: ToTree, const N: usize> ToTree for [T; N] {
    fn to_tree(&self) -> Value {
        self.as_slice().to_tree()
    }
}

// ---- Comparisons with plain values (as serde_json's tree compares) ------------------------------

impl PartialEq<str> for Value {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

impl PartialEq<&str> for Value {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl PartialEq<String> for Value {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == Some(other.as_str())
    }
}

impl PartialEq<Value> for &str {
    fn eq(&self, other: &Value) -> bool {
        other == self
    }
}

impl PartialEq<Value> for str {
    fn eq(&self, other: &Value) -> bool {
        other == self
    }
}

impl PartialEq<Value> for String {
    fn eq(&self, other: &Value) -> bool {
        other == self
    }
}

impl PartialEq<bool> for Value {
    fn eq(&self, other: &bool) -> bool {
        self.as_bool() == Some(*other)
    }
}

macro_rules! eq_integer {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Value {
            fn eq(&self, other: &$t) -> bool {
                match i64::try_from(*other) {
                    Ok(i) => self.as_i64() == Some(i),
                    Err(_) => u64::try_from(*other).is_ok_and(|u| self.as_u64() == Some(u)),
                }
            }
        }

        impl PartialEq<Value> for $t {
            fn eq(&self, other: &Value) -> bool {
                other == self
            }
        }
    )*};
}
eq_integer!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

// ---- Errors ------------------------------------------------------------------------------------

/// A failed parse or read: serde_json's error in its words, `at line L column C` for a syntax error.
/// Boxed, so that a `Result` carrying it is a pointer wider than its value at most.
#[derive(Clone, PartialEq)]
pub struct Error(Box<ErrorParts>);

#[derive(Clone, PartialEq)]
struct ErrorParts {
    message: Box<str>,
    /// Line and column of a syntax error (1-based line; column in bytes from the line's start).
    at: Option<(usize, usize)>,
}

impl Error {
    fn syntax(message: &str, text: &[u8], index: usize) -> Self {
        let before = &text[..index.min(text.len())];
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1);
        let line = 1 + before[..line_start].iter().filter(|b| **b == b'\n').count();
        Error(Box::new(ErrorParts {
            message: message.into(),
            at: Some((line, index.min(text.len()) - line_start)),
        }))
    }

    /// Whether the text was not JSON (as against JSON of another shape).
    pub fn is_syntax(&self) -> bool {
        self.0.at.is_some()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.at {
            Some((line, column)) => {
                write!(f, "{} at line {line} column {column}", self.0.message)
            }
            None => f.write_str(&self.0.message),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?})", self.to_string())
    }
}

impl std::error::Error for Error {}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(Box::new(ErrorParts {
            message: msg.to_string().into(),
            at: None,
        }))
    }

    fn invalid_type(unexpected: serde::de::Unexpected, expected: &dyn serde::de::Expected) -> Self {
        Self::custom(format_args!(
            "invalid type: {}, expected {expected}",
            InJson(unexpected)
        ))
    }

    fn invalid_value(
        unexpected: serde::de::Unexpected,
        expected: &dyn serde::de::Expected,
    ) -> Self {
        Self::custom(format_args!(
            "invalid value: {}, expected {expected}",
            InJson(unexpected)
        ))
    }
}

/// What serde calls a value, in serde's words but for its unit value, which is JSON's `null` (as
/// serde_json says). A float is named without its digits: the program's readers never meet one
/// as a float (a number that is not an integer stays text and is named as written:
/// `json::invalid_type`), and serde's digits would link the float formatter into the Worker
/// ("Size and start").
struct InJson<'a>(serde::de::Unexpected<'a>);

impl fmt::Display for InJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use serde::de::Unexpected as U;
        match self.0 {
            U::Bool(b) => write!(f, "boolean `{b}`"),
            U::Unsigned(n) => write!(f, "integer `{n}`"),
            U::Signed(n) => write!(f, "integer `{n}`"),
            U::Char(c) => write!(f, "character `{c}`"),
            U::Str(s) => write!(f, "string {}", Quoted(s)),
            U::Other(other) => f.write_str(other),
            other => f.write_str(match other {
                U::Float(_) => "floating point",
                U::Bytes(_) => "byte array",
                U::Unit => "null",
                U::Option => "Option value",
                U::NewtypeStruct => "newtype struct",
                U::Seq => "sequence",
                U::Map => "map",
                U::Enum => "enum",
                U::UnitVariant => "unit variant",
                U::NewtypeVariant => "newtype variant",
                U::TupleVariant => "tuple variant",
                _ => "struct variant",
            }),
        }
    }
}

/// Text in double quotes, escaped as Rust's `Debug` escapes a string for the characters it meets
/// here: quote, backslash, the named escapes and every control character (`\u{1b}`); others are
/// written as they are, where `Debug` would also escape the few that are not printable (format
/// characters, unassigned code points) or that extend a grapheme. The Worker is built with `Debug`
/// writing nothing (`scripts/build`), so every text it says or logs quotes with this.
pub struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\0' => f.write_str("\\0")?,
                c if c.is_control() => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

impl serde::ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        <Self as serde::de::Error>::custom(msg)
    }
}

// ---- The parser --------------------------------------------------------------------------------

const EOF_VALUE: &str = "EOF while parsing a value";
const EOF_LIST: &str = "EOF while parsing a list";
const EOF_OBJECT: &str = "EOF while parsing an object";
const EOF_STRING: &str = "EOF while parsing a string";
const EXPECTED_VALUE: &str = "expected value";
const EXPECTED_IDENT: &str = "expected ident";
const EXPECTED_COLON: &str = "expected `:`";
const LIST_COMMA_OR_END: &str = "expected `,` or `]`";
const OBJECT_COMMA_OR_END: &str = "expected `,` or `}`";
const KEY_STRING: &str = "key must be a string";
const TRAILING_COMMA: &str = "trailing comma";
const TRAILING: &str = "trailing characters";
const INVALID_NUMBER: &str = "invalid number";
const INVALID_ESCAPE: &str = "invalid escape";
const CONTROL: &str = "control character (\\u0000-\\u001F) found while parsing a string";
const LONE_SURROGATE: &str = "lone leading surrogate in hex escape";
const END_OF_HEX: &str = "unexpected end of hex escape";
const TOO_DEEP: &str = "recursion limit exceeded";
const OUT_OF_RANGE: &str = "number out of range";

/// The digits of the least number a float rounds up to infinity (2^1024 − 2^970, the largest
/// float plus half its last place), as a fraction `0.1797…` of 10^309.
const F64_OVERFLOW: &[u8] = b"179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792";

/// Whether the (valid) JSON number `text` is below what a float rounds to infinity, as serde_json
/// and the runners' parsers require (a smaller one, however small, is taken: it rounds to zero).
/// Decided on the digits, with no float.
fn within_f64(text: &str) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => (text, "0"),
    };
    let mantissa = mantissa.trim_start_matches('-');
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // The significant digits, and the power of ten of the first one's place plus one.
    let whole = whole.trim_start_matches('0');
    let (digits, mut place): (Vec<u8>, i64) = if whole.is_empty() {
        let f = fraction.trim_start_matches('0');
        (f.bytes().collect(), -((fraction.len() - f.len()) as i64))
    } else {
        (
            whole.bytes().chain(fraction.bytes()).collect(),
            whole.len() as i64,
        )
    };
    let digits: &[u8] = {
        let end = digits.iter().rposition(|d| *d != b'0').map_or(0, |p| p + 1);
        &digits[..end]
    };
    if digits.is_empty() {
        return true;
    }
    let (negative, exp_digits) = match exponent.as_bytes().first() {
        Some(b'-') => (true, &exponent[1..]),
        Some(b'+') => (false, &exponent[1..]),
        _ => (false, exponent),
    };
    // Saturated: any exponent past a few thousand decides alone.
    let e = exp_digits
        .bytes()
        .fold(0i64, |e, d| (e * 10 + i64::from(d - b'0')).min(1_000_000));
    place += if negative { -e } else { e };
    match place.cmp(&309) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => digits < F64_OVERFLOW,
    }
}

/// Arrays and objects open at once, at most (serde_json's limit: 128 refuses).
const DEPTH: usize = 127;

/// Parses JSON text into a tree (see the module's note for what differs from serde_json).
pub fn parse(text: &str) -> Result<Value, Error> {
    let mut p = Parser {
        src: text,
        text: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let v = p.value()?;
    match p.skip_ws() {
        Some(_) => Err(p.peek_error(TRAILING)),
        None => Ok(v),
    }
}

struct Parser<'a> {
    /// The text, and its bytes (what is read; every cut the parser makes in a string falls
    /// before an ASCII byte, a quote or a backslash, so slices of `src` there are text).
    src: &'a str,
    text: &'a [u8],
    /// The next byte to read.
    at: usize,
    /// Arrays and objects open.
    depth: usize,
}

impl Parser<'_> {
    /// An error at the byte just read (serde_json's `error`).
    #[cold]
    fn error(&self, message: &str) -> Error {
        Error::syntax(message, self.text, self.at)
    }

    /// An error at the byte about to be read (serde_json's `peek_error`).
    #[cold]
    fn peek_error(&self, message: &str) -> Error {
        Error::syntax(message, self.text, self.at + 1)
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    /// The next byte that is not whitespace, not consumed.
    fn skip_ws(&mut self) -> Option<u8> {
        while let Some(b) = self.peek() {
            if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    fn value(&mut self) -> Result<Value, Error> {
        let Some(b) = self.skip_ws() else {
            return Err(self.peek_error(EOF_VALUE));
        };
        match b {
            b'n' => self.ident(b"null").map(|_| Value::Null),
            b't' => self.ident(b"true").map(|_| Value::Bool(true)),
            b'f' => self.ident(b"false").map(|_| Value::Bool(false)),
            b'-' | b'0'..=b'9' => self.number().map(Value::Number),
            b'"' => {
                self.at += 1;
                self.string().map(Value::String)
            }
            b'[' => {
                self.open()?;
                let items = self.array();
                self.depth -= 1;
                items.map(Value::Array)
            }
            b'{' => {
                self.open()?;
                let entries = self.object();
                self.depth -= 1;
                entries.map(|e| Value::Object(Map::from_entries(e)))
            }
            _ => Err(self.peek_error(EXPECTED_VALUE)),
        }
    }

    fn open(&mut self) -> Result<(), Error> {
        if self.depth == DEPTH {
            return Err(self.peek_error(TOO_DEEP));
        }
        self.depth += 1;
        self.at += 1;
        Ok(())
    }

    fn ident(&mut self, word: &[u8]) -> Result<(), Error> {
        self.at += 1;
        for expected in &word[1..] {
            match self.next() {
                None => return Err(self.error(EOF_VALUE)),
                Some(b) if b != *expected => return Err(self.error(EXPECTED_IDENT)),
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn number(&mut self) -> Result<Number, Error> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        match self.next() {
            None => return Err(self.error(EOF_VALUE)),
            Some(b'0') => {
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(self.peek_error(INVALID_NUMBER));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            Some(_) => return Err(self.error(INVALID_NUMBER)),
        }
        let integer_end = self.at;
        if self.peek() == Some(b'.') {
            self.at += 1;
            let from = self.at;
            self.digits();
            if self.at == from {
                return Err(match self.peek() {
                    Some(_) => self.peek_error(INVALID_NUMBER),
                    None => self.peek_error(EOF_VALUE),
                });
            }
        }
        // Where an out-of-range number is refused: past the exponent digit that takes the exponent
        // beyond 32 bits, if any (serde_json stops there), else past the number.
        let mut refuse_at = None;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            match self.next() {
                None => return Err(self.error(EOF_VALUE)),
                Some(b'0'..=b'9') => {
                    let mut e = u64::from(self.text[self.at - 1] - b'0');
                    while let Some(d @ b'0'..=b'9') = self.peek() {
                        self.at += 1;
                        e = (e * 10 + u64::from(d - b'0')).min(u64::from(u32::MAX));
                        if e > i32::MAX as u64 && refuse_at.is_none() {
                            refuse_at = Some(self.at);
                        }
                    }
                }
                Some(_) => return Err(self.error(INVALID_NUMBER)),
            }
        }
        // The text is ASCII digits, signs, `.` and exponents: valid UTF-8 at every cut.
        let text = std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default();
        if self.at == integer_end {
            let digits = &text[usize::from(negative)..];
            if let Ok(u) = digits.parse::<u64>() {
                match (negative, u) {
                    (false, u) => return Ok(Number(Num::Pos(u))),
                    (true, 0) => {}
                    (true, u) => {
                        if let Some(i) = 0i64.checked_sub_unsigned(u) {
                            return Ok(Number(Num::Neg(i)));
                        }
                    }
                }
            }
        }
        if !within_f64(text) {
            self.at = refuse_at.unwrap_or(self.at);
            return Err(self.error(OUT_OF_RANGE));
        }
        Ok(Number(Num::Text(text.into())))
    }

    /// A string's content, its opening quote read.
    fn string(&mut self) -> Result<String, Error> {
        let mut out = String::new();
        let mut start = self.at;
        loop {
            while self
                .peek()
                .is_some_and(|b| b != b'"' && b != b'\\' && b >= 0x20)
            {
                self.at += 1;
            }
            match self.peek() {
                None => return Err(self.error(EOF_STRING)),
                Some(b'"') => {
                    let last = &self.src[start..self.at];
                    self.at += 1;
                    // Without escapes, one copy of exactly its length.
                    if out.is_empty() {
                        return Ok(last.to_owned());
                    }
                    out.push_str(last);
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.push_str(&self.src[start..self.at]);
                    self.at += 1;
                    self.escape(&mut out)?;
                    start = self.at;
                }
                Some(_) => {
                    self.at += 1;
                    return Err(self.error(CONTROL));
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), Error> {
        let Some(b) = self.next() else {
            return Err(self.error(EOF_STRING));
        };
        let plain = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode(out),
            _ => return Err(self.error(INVALID_ESCAPE)),
        };
        out.push(plain);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u16, Error> {
        let Some(four) = self.text.get(self.at..self.at + 4) else {
            self.at = self.text.len();
            return Err(self.error(EOF_STRING));
        };
        self.at += 4;
        let mut n: u16 = 0;
        for b in four {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(self.error(INVALID_ESCAPE)),
            };
            n = (n << 4) | u16::from(d);
        }
        Ok(n)
    }

    /// A `\u` escape, its `\u` read: a scalar value, or a surrogate pair as two escapes.
    fn unicode(&mut self, out: &mut String) -> Result<(), Error> {
        let n = self.hex4()?;
        let scalar = match n {
            0xDC00..=0xDFFF => return Err(self.error(LONE_SURROGATE)),
            0xD800..=0xDBFF => {
                for expected in [b'\\', b'u'] {
                    match self.peek() {
                        None => return Err(self.error(EOF_STRING)),
                        Some(b) if b == expected => self.at += 1,
                        Some(_) => {
                            self.at += 1;
                            return Err(self.error(END_OF_HEX));
                        }
                    }
                }
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.error(LONE_SURROGATE));
                }
                0x1_0000 + ((u32::from(n) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
            }
            n => u32::from(n),
        };
        let c = char::from_u32(scalar).ok_or_else(|| self.error(INVALID_ESCAPE))?;
        out.push(c);
        Ok(())
    }

    /// An array's elements, its `[` read.
    fn array(&mut self) -> Result<Vec<Value>, Error> {
        let mut items = Vec::new();
        loop {
            let Some(b) = self.skip_ws() else {
                return Err(self.peek_error(EOF_LIST));
            };
            match b {
                b']' => {
                    self.at += 1;
                    return Ok(items);
                }
                _ if items.is_empty() => {}
                b',' => {
                    self.at += 1;
                    match self.skip_ws() {
                        Some(b']') => return Err(self.peek_error(TRAILING_COMMA)),
                        Some(_) => {}
                        None => return Err(self.peek_error(EOF_VALUE)),
                    }
                }
                _ => return Err(self.peek_error(LIST_COMMA_OR_END)),
            }
            items.push(self.value()?);
        }
    }

    /// An object's entries in the order written, its `{` read.
    fn object(&mut self) -> Result<Vec<(String, Value)>, Error> {
        let mut entries = Vec::new();
        loop {
            let Some(b) = self.skip_ws() else {
                return Err(self.peek_error(EOF_OBJECT));
            };
            match b {
                b'}' => {
                    self.at += 1;
                    return Ok(entries);
                }
                b'"' if entries.is_empty() => {}
                _ if entries.is_empty() => return Err(self.peek_error(KEY_STRING)),
                b',' => {
                    self.at += 1;
                    match self.skip_ws() {
                        Some(b'"') => {}
                        Some(b'}') => return Err(self.peek_error(TRAILING_COMMA)),
                        Some(_) => return Err(self.peek_error(KEY_STRING)),
                        None => return Err(self.peek_error(EOF_VALUE)),
                    }
                }
                _ => return Err(self.peek_error(OBJECT_COMMA_OR_END)),
            }
            self.at += 1;
            let key = self.string()?;
            match self.skip_ws() {
                Some(b':') => self.at += 1,
                Some(_) => return Err(self.peek_error(EXPECTED_COLON)),
                None => return Err(self.peek_error(EOF_OBJECT)),
            }
            let value = self.value()?;
            entries.push((key, value));
        }
    }
}

/// A [`Value`] written as JSON in Rust: `json!({"key": value, "list": [1, x], "none": null})`.
/// A key is a string literal, or a variable or parenthesised expression of text; a value is `null`, an array or object written the same way, or an
/// expression, taken by reference and copied into the tree ([`ToTree`]).
#[macro_export]
macro_rules! json {
    (null) => { $crate::json_tree::Value::Null };
    ([ $($body:tt)* ]) => {
        $crate::json_tree::Value::Array($crate::json!(@array [] $($body)*))
    };
    ({ $($body:tt)* }) => {
        $crate::json_tree::Value::Object({
            #[allow(unused_mut)]
            let mut object = $crate::json_tree::Map::new();
            $crate::json!(@object object $($body)*);
            object
        })
    };
    ($e:expr) => { $crate::json_tree::ToTree::to_tree(&$e) };

    (@array [$($done:expr,)*]) => { vec![$($done,)*] };
    (@array [$($done:expr,)*] null $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json_tree::Value::Null,] $($($rest)*)?)
    };
    (@array [$($done:expr,)*] [$($inner:tt)*] $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json!([$($inner)*]),] $($($rest)*)?)
    };
    (@array [$($done:expr,)*] {$($inner:tt)*} $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json!({$($inner)*}),] $($($rest)*)?)
    };
    (@array [$($done:expr,)*] $e:expr $(, $($rest:tt)*)?) => {
        $crate::json!(@array [$($done,)* $crate::json!($e),] $($($rest)*)?)
    };

    (@object $m:ident) => {};
    (@object $m:ident $k:tt : null $(, $($rest:tt)*)?) => {
        $m.set($k, $crate::json_tree::Value::Null);
        $crate::json!(@object $m $($($rest)*)?);
    };
    (@object $m:ident $k:tt : [$($inner:tt)*] $(, $($rest:tt)*)?) => {
        $m.set($k, $crate::json!([$($inner)*]));
        $crate::json!(@object $m $($($rest)*)?);
    };
    (@object $m:ident $k:tt : {$($inner:tt)*} $(, $($rest:tt)*)?) => {
        $m.set($k, $crate::json!({$($inner)*}));
        $crate::json!(@object $m $($($rest)*)?);
    };
    (@object $m:ident $k:tt : $e:expr $(, $($rest:tt)*)?) => {
        $m.set($k, $crate::json!($e));
        $crate::json!(@object $m $($($rest)*)?);
    };
}

#[cfg(test)]
mod tests;
