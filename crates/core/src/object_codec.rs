//! The text the Worker and its objects exchange: calls and replies of the session object
//! ([`crate::session_protocol`]) and of the queue dispatcher ([`crate::dispatch`]).
//!
//! Both sides are one build (one script deploys the Worker and its object classes), so the messages
//! need no field names, no escaping and no tolerance for shapes the other side never writes. A value
//! is written field by field in its declared order:
//! - an integer as its decimal digits and `;` (`-` first when negative);
//! - a boolean as `t` or `f`;
//! - a string as its UTF-8 length in bytes, `:`, then its bytes as they are;
//! - an option as `n`, or `s` and the value;
//! - a sequence as its length (an integer) and its items; a pair as its two values;
//! - an enum as its variant's number (an integer) and the variant's fields.
//!
//! Reading is a cursor over the text: a string is one slice copied out, with no tree built and no
//! escape undone. Against the JSON this replaced (serde's derived readers through a parsed tree and
//! its writers), the module is smaller and each hop allocates less (docs/ARCHITECTURE.md, "Size
//! and start"). A text that is not what the reader expects is [`Malformed`], naming what it expected
//! and where; that is a build mismatch or a bug, never a caller's mistake, and the callers answer it
//! as an infrastructure failure, as they did an unreadable JSON reply.

use std::fmt;

/// A message's text did not have the shape its reader expects: what was expected, at which byte
/// of the message after its layout stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub expected: &'static str,
    pub at: usize,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an object message is malformed: expected {} at byte {}",
            self.expected, self.at
        )
    }
}

impl std::error::Error for Malformed {}

/// A value that travels between the Worker and its objects.
///
/// Reading never stops early: the first misfit is recorded in the [`Reader`] and every later read
/// returns a placeholder (an empty string, zero, `None`, an enum's variant 0), so a struct's reader is
/// its fields' reads in a row, with no exit that must drop the fields read before it (code the
/// module would carry for every field of every message). [`decode`] then refuses the message whole.
pub trait Codec: Sized {
    /// Appends the value's text to `out`.
    fn put(&self, out: &mut String);
    /// Reads one value from `r`, leaving the cursor after it; after a misfit, a placeholder.
    fn take(r: &mut Reader<'_>) -> Self;
}

/// The messages' layout. Each message begins with it and `|`, so a Worker and an object whose
/// layouts differ, which meet for the moment a deploy swaps the code, refuse each other's messages
/// ([`Malformed`]) instead of reading fields by the wrong layout; builds of one layout keep talking
/// across a deploy. A test pins the digest of every message's text to it
/// (`session_protocol::tests::the_messages_layout_is_pinned_to_its_version`): a change that alters
/// any message's text (a variant's number, a field's place, a field's type written otherwise, a
/// field added or dropped) fails there until this is bumped. A new variant alters no message already
/// sent (a build without it refuses it as [`Malformed`], as an unknown number): its sample moves the
/// digest, which is pinned again with the layout kept.
pub const LAYOUT: &str = "1";

/// FNV-1a (64 bits) of `text`: the digest the layout test pins.
#[cfg(test)]
pub fn digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The text of `value`, stamped with [`LAYOUT`].
pub fn encode<T: Codec>(value: &T) -> String {
    let mut out = String::with_capacity(128);
    out.push_str(LAYOUT);
    out.push('|');
    value.put(&mut out);
    out
}

/// The value `text` holds; the whole text must be that one value, stamped with [`LAYOUT`].
pub fn decode<T: Codec>(text: &str) -> Result<T, Malformed> {
    let body = text
        .strip_prefix(LAYOUT)
        .and_then(|rest| rest.strip_prefix('|'))
        .ok_or(Malformed {
            expected: "a message of this layout",
            at: 0,
        })?;
    let mut r = Reader {
        text: body,
        at: 0,
        misfit: None,
    };
    let value = T::take(&mut r);
    if r.misfit.is_none() && r.at != body.len() {
        r.fail("the end of the message");
    }
    match r.misfit {
        None => Ok(value),
        Some(m) => Err(m),
    }
}

/// A cursor over a message's text, and the first misfit met in it.
pub struct Reader<'a> {
    text: &'a str,
    at: usize,
    misfit: Option<Malformed>,
}

impl Reader<'_> {
    /// Records that `expected` was not found here (the first misfit is kept).
    pub fn fail(&mut self, expected: &'static str) {
        if self.misfit.is_none() {
            self.misfit = Some(Malformed {
                expected,
                at: self.at,
            });
        }
    }

    /// Whether a misfit was met: every read from then on returns its placeholder.
    pub fn failed(&self) -> bool {
        self.misfit.is_some()
    }

    /// The next byte, consumed (`None` at the end or after a misfit).
    fn byte(&mut self) -> Option<u8> {
        if self.failed() {
            return None;
        }
        let b = *self.text.as_bytes().get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// Decimal digits up to `end` (consumed), with a leading `-` when `signed`: the magnitude and
    /// whether it was negative; `(0, false)` after a misfit.
    fn digits(&mut self, end: u8, signed: bool) -> (u64, bool) {
        if self.failed() {
            return (0, false);
        }
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut at = start;
        let negative = signed && bytes.get(at) == Some(&b'-');
        if negative {
            at += 1;
        }
        let first = at;
        let mut n: u64 = 0;
        while let Some(&b) = bytes.get(at) {
            if b == end {
                break;
            }
            let d = b.wrapping_sub(b'0');
            let next = n.checked_mul(10).and_then(|n| n.checked_add(u64::from(d)));
            match next {
                Some(next) if d <= 9 => n = next,
                Some(_) => {
                    self.fail("an integer");
                    return (0, false);
                }
                None => {
                    self.fail("an integer in range");
                    return (0, false);
                }
            }
            at += 1;
        }
        if at == first || bytes.get(at) != Some(&end) {
            self.fail("an integer and its terminator");
            return (0, false);
        }
        self.at = at + 1;
        (n, negative)
    }

    /// The variant number of an enum (0 after a misfit).
    pub fn variant(&mut self) -> u64 {
        self.digits(b';', false).0
    }
}

impl Codec for u64 {
    fn put(&self, out: &mut String) {
        put_digits(*self, ';', out);
    }
    fn take(r: &mut Reader<'_>) -> Self {
        r.digits(b';', false).0
    }
}

impl Codec for i64 {
    fn put(&self, out: &mut String) {
        if *self < 0 {
            out.push('-');
        }
        self.unsigned_abs().put(out);
    }
    fn take(r: &mut Reader<'_>) -> Self {
        let at = r.at;
        let (n, negative) = r.digits(b';', true);
        let v = if negative {
            0i64.checked_sub_unsigned(n)
        } else {
            i64::try_from(n).ok()
        };
        v.unwrap_or_else(|| {
            r.at = at;
            r.fail("an i64");
            0
        })
    }
}

/// Narrower unsigned integers, written as `u64`.
macro_rules! codec_narrow {
    ($($t:ty),*) => {$(
        impl Codec for $t {
            fn put(&self, out: &mut String) {
                (*self as u64).put(out);
            }
            fn take(r: &mut Reader<'_>) -> Self {
                let at = r.at;
                <$t>::try_from(u64::take(r)).unwrap_or_else(|_| {
                    r.at = at;
                    r.fail(stringify!($t));
                    0
                })
            }
        }
    )*};
}
codec_narrow!(u16, usize);

impl Codec for bool {
    fn put(&self, out: &mut String) {
        out.push(if *self { 't' } else { 'f' });
    }
    fn take(r: &mut Reader<'_>) -> Self {
        match r.byte() {
            Some(b't') => true,
            Some(b'f') => false,
            _ => {
                r.fail("a boolean");
                false
            }
        }
    }
}

/// Appends `n`'s decimal digits and `end`.
fn put_digits(n: u64, end: char, out: &mut String) {
    crate::json_tree::write_digits(n, out);
    out.push(end);
}

/// Appends `s` as a string is written (read back as a `String`).
pub fn put_str(s: &str, out: &mut String) {
    put_digits(s.len() as u64, ':', out);
    out.push_str(s);
}

impl Codec for String {
    fn put(&self, out: &mut String) {
        put_str(self, out);
    }
    fn take(r: &mut Reader<'_>) -> Self {
        let (len, _) = r.digits(b':', false);
        if r.failed() {
            return String::new();
        }
        let start = r.at;
        // `get` is `None` past the end and off a character boundary.
        let s = usize::try_from(len)
            .ok()
            .and_then(|len| start.checked_add(len))
            .and_then(|end| r.text.get(start..end));
        match s {
            Some(s) => {
                r.at = start + s.len();
                s.to_owned()
            }
            None => {
                r.fail("a string's bytes");
                String::new()
            }
        }
    }
}

impl<T: Codec> Codec for Option<T> {
    fn put(&self, out: &mut String) {
        match self {
            None => out.push('n'),
            Some(v) => {
                out.push('s');
                v.put(out);
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Self {
        match r.byte() {
            Some(b'n') => None,
            Some(b's') => Some(T::take(r)),
            _ => {
                r.fail("an option");
                None
            }
        }
    }
}

impl<T: Codec> Codec for Vec<T> {
    fn put(&self, out: &mut String) {
        (self.len() as u64).put(out);
        for item in self {
            item.put(out);
        }
    }
    fn take(r: &mut Reader<'_>) -> Self {
        let len = u64::take(r);
        // Each item takes at least one byte: a length beyond what is left is a misfit, and
        // reserving for it is bounded by the text.
        if len > (r.text.len() - r.at) as u64 {
            r.fail("a sequence no longer than its text");
            return Vec::new();
        }
        let mut items = Vec::with_capacity(len as usize);
        for _ in 0..len {
            if r.failed() {
                break;
            }
            items.push(T::take(r));
        }
        items
    }
}

impl<A: Codec, B: Codec> Codec for (A, B) {
    fn put(&self, out: &mut String) {
        self.0.put(out);
        self.1.put(out);
    }
    fn take(r: &mut Reader<'_>) -> Self {
        let a = A::take(r);
        (a, B::take(r))
    }
}

impl<T: Codec> Codec for Box<T> {
    fn put(&self, out: &mut String) {
        (**self).put(out);
    }
    fn take(r: &mut Reader<'_>) -> Self {
        Box::new(T::take(r))
    }
}

/// `Codec` for a struct with named fields, written in the order listed (every field, once).
#[macro_export]
macro_rules! codec_struct {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        impl $crate::object_codec::Codec for $ty {
            fn put(&self, out: &mut String) {
                $( $crate::object_codec::Codec::put(&self.$field, out); )*
            }
            fn take(r: &mut $crate::object_codec::Reader<'_>) -> Self {
                Self { $( $field: $crate::object_codec::Codec::take(r), )* }
            }
        }
    };
}

/// `Codec` for an enum: each variant with its number, then its one tuple field or its named
/// fields (or nothing). Numbers are the wire's: a variant keeps its number. One variant must be
/// numbered 0: after a misfit, it is the placeholder.
#[macro_export]
macro_rules! codec_enum {
    ($ty:ty {
        $( $n:literal => $var:ident $( ( $tup:ident ) )? $( { $($f:ident),* $(,)? } )? ),* $(,)?
    }) => {
        const _: () = assert!($( $n == 0 )||*, "one variant must be numbered 0");
        impl $crate::object_codec::Codec for $ty {
            fn put(&self, out: &mut String) {
                match self {
                    $( Self::$var $( ($tup) )? $( { $($f),* } )? => {
                        $crate::object_codec::Codec::put(&($n as u64), out);
                        $( $crate::object_codec::Codec::put($tup, out); )?
                        $( $( $crate::object_codec::Codec::put($f, out); )* )?
                    } )*
                }
            }
            fn take(r: &mut $crate::object_codec::Reader<'_>) -> Self {
                match r.variant() {
                    $( $n => Self::$var
                        $( ({ let $tup = $crate::object_codec::Codec::take(r); $tup }) )?
                        $( { $($f: $crate::object_codec::Codec::take(r)),* } )?, )*
                    _ => {
                        r.fail("a known variant");
                        // Failed, the reader answers variant 0 and every field's placeholder.
                        Self::take(r)
                    }
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `v`'s text after the build's stamp, having checked that it reads back as `v`.
    fn round<T: Codec + PartialEq + fmt::Debug>(v: T) -> String {
        let text = encode(&v);
        assert_eq!(decode::<T>(&text).unwrap(), v, "{text}");
        text.strip_prefix(&msg("")).unwrap().to_owned()
    }

    /// `body` stamped as a message of this layout.
    fn msg(body: &str) -> String {
        format!("{LAYOUT}|{body}")
    }

    #[test]
    fn scalars_are_written_as_documented_and_read_back() {
        assert_eq!(round(0u64), "0;");
        assert_eq!(round(u64::MAX), "18446744073709551615;");
        assert_eq!(round(i64::MIN), "-9223372036854775808;");
        assert_eq!(round(-7i64), "-7;");
        assert_eq!(round(true), "t");
        assert_eq!(round(String::from("a;b:é\n\"")), "8:a;b:é\n\"");
        assert_eq!(round(String::new()), "0:");
        assert_eq!(round(None::<String>), "n");
        assert_eq!(round(Some(3u16)), "s3;");
        assert_eq!(round(vec![(String::from("k"), 1i64)]), "1;1:k1;");
        assert_eq!(round(Box::new(5usize)), "5;");
    }

    #[derive(Debug, PartialEq)]
    struct Pair {
        name: String,
        seq: i64,
    }
    codec_struct!(Pair { name, seq });

    #[derive(Debug, PartialEq)]
    enum Shape {
        Unit,
        One(Pair),
        Named { a: bool, b: Option<String> },
    }
    codec_enum!(Shape {
        0 => Unit,
        1 => One(p),
        2 => Named { a, b },
    });

    #[test]
    fn structs_and_enums_are_their_fields_in_order() {
        assert_eq!(round(Shape::Unit), "0;");
        assert_eq!(
            round(Shape::One(Pair {
                name: "x".into(),
                seq: 2
            })),
            "1;1:x2;"
        );
        assert_eq!(
            round(Shape::Named {
                a: false,
                b: Some("yz".into())
            }),
            "2;fs2:yz"
        );
    }

    #[test]
    fn malformed_text_is_refused_with_where_it_went_wrong() {
        assert_eq!(
            decode::<Shape>(&msg("9;")).unwrap_err().expected,
            "a known variant"
        );
        assert_eq!(
            decode::<u64>(&msg("12")).unwrap_err().expected,
            "an integer and its terminator"
        );
        assert_eq!(
            decode::<u64>(&msg("1x;")).unwrap_err(),
            Malformed {
                expected: "an integer",
                at: 0
            }
        );
        assert_eq!(
            decode::<u64>(&msg("99999999999999999999;"))
                .unwrap_err()
                .expected,
            "an integer in range"
        );
        assert_eq!(
            decode::<i64>(&msg("9223372036854775808;"))
                .unwrap_err()
                .expected,
            "an i64"
        );
        assert_eq!(decode::<u16>(&msg("70000;")).unwrap_err().expected, "u16");
        assert_eq!(
            decode::<String>(&msg("5:abc")).unwrap_err().expected,
            "a string's bytes"
        );
        // A length that cuts a character in two.
        assert_eq!(
            decode::<String>(&msg("1:é")).unwrap_err().expected,
            "a string's bytes"
        );
        assert_eq!(decode::<bool>(&msg("x")).unwrap_err().expected, "a boolean");
        assert_eq!(
            decode::<Option<u64>>(&msg("")).unwrap_err().expected,
            "an option"
        );
        assert_eq!(
            decode::<u64>(&msg("1;2;")).unwrap_err().expected,
            "the end of the message"
        );
        assert_eq!(
            decode::<Vec<u64>>(&msg("1000;1;")).unwrap_err().expected,
            "a sequence no longer than its text"
        );
        assert!(decode::<Pair>(&msg("1:x")).is_err());
    }

    #[test]
    fn a_message_of_another_build_is_refused_whole() {
        let text = encode(&7u64);
        assert_eq!(decode::<u64>(&text), Ok(7));
        for other in ["other|7;", "7;", "native7;", ""] {
            assert_eq!(
                decode::<u64>(other).unwrap_err(),
                Malformed {
                    expected: "a message of this layout",
                    at: 0
                }
            );
        }
    }

    #[test]
    fn every_prefix_of_a_message_is_refused_and_never_panics() {
        let text = encode(&Shape::Named {
            a: true,
            b: Some("héllo".into()),
        });
        for end in 0..text.len() {
            if let Some(prefix) = text.get(..end) {
                assert!(decode::<Shape>(prefix).is_err(), "{prefix:?}");
            }
        }
    }
}
