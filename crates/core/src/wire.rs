//! Strictly typed JSON input. A request body is read into a Rust type that refuses unknown
//! fields, wrong types and out-of-range numbers, and every error names the JSON path of the
//! field it is about (`spec.signature.content`, `entries[2].kind`), so that a client learns
//! what to fix without reading signet's source.
//!
//! The field types here ([`Base64`], [`Hex`], [`Index`]) decode while the body is read: bytes
//! that are not what the field's encoding allows fail at the field, with its path, not later
//! in a handler that no longer knows where they came from.
//!
//! serde reads a struct from a JSON array as well as from an object (`["0.0.1", …]` for
//! `{"apiVersion": "0.0.1", …}`). Go's encoding/json and protojson, which Sigstore's clients
//! and servers use, do not; neither do we: documents are read as [`Object`]s, and a field
//! that holds a struct says so with `#[serde(deserialize_with = "wire::object")]` (or
//! [`object_opt`], [`objects`]).

use std::fmt;

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, Deserializer, Error as _, MapAccess, Visitor};
use serde::Deserialize;

/// What was wrong with a JSON input, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The JSON path of the field, `a.b[2].c`; empty for the body as a whole.
    pub path: String,
    /// What was wrong and what was expected, without the path.
    pub why: String,
    /// The input is not JSON at all (a syntax error or a truncated body), rather than JSON of
    /// the wrong shape.
    pub syntax: bool,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.is_empty() {
            true => f.write_str(&self.why),
            false => write!(f, "{}: {}", self.path, self.why),
        }
    }
}

impl std::error::Error for InputError {}

impl InputError {
    pub fn at(path: impl Into<String>, why: impl Into<String>) -> Self {
        InputError { path: path.into(), why: why.into(), syntax: false }
    }

    /// The same error, seen from an enclosing document in which this one sits at `prefix`.
    pub fn within(mut self, prefix: &str) -> Self {
        self.path = join(prefix, &self.path);
        self
    }
}

/// `prefix` and `path` as one JSON path.
pub fn join(prefix: &str, path: &str) -> String {
    match (prefix.is_empty(), path.is_empty(), path.starts_with('[')) {
        (true, _, _) => path.to_string(),
        (_, true, _) => prefix.to_string(),
        (_, _, true) => format!("{prefix}{path}"),
        _ => format!("{prefix}.{path}"),
    }
}

/// Reads `bytes`, a JSON object, as a `T`.
///
/// Tracking the path costs a few microseconds per body (every key and element is recorded as
/// it is read), so a body is read without it first; only one that fails is read again, with
/// it, to say where. The same bytes fail at the same place both times.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, InputError> {
    match serde_json::from_slice::<Object<T>>(bytes) {
        Ok(Object(value)) => Ok(value),
        Err(_) => from_slice_tracked(bytes),
    }
}

fn from_slice_tracked<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, InputError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Object(value) = serde_path_to_error::deserialize(&mut de).map_err(input_error)?;
    // Trailing bytes after the document are not JSON either.
    de.end().map_err(|e| InputError { path: String::new(), why: without_position(&e), syntax: true })?;
    Ok(value)
}

/// Reads a JSON document held in a string field at `path` (a DSSE envelope inside a Rekor
/// entry): its errors name the field, then the path inside it.
pub fn from_str_at<T: DeserializeOwned>(text: &str, path: &str) -> Result<T, InputError> {
    from_slice(text.as_bytes()).map_err(|e| {
        let what = if e.syntax { "is not JSON: " } else { "" };
        InputError { why: format!("{what}{}", e.why), syntax: false, ..e }.within(path)
    })
}

/// Reads a `T` out of an already-parsed object found at `path`.
pub fn from_value<T: DeserializeOwned>(value: &serde_json::Value, path: &str) -> Result<T, InputError> {
    // As in `from_slice`: the path is tracked only to explain a failure.
    match Object::<T>::deserialize(value) {
        Ok(Object(v)) => Ok(v),
        Err(_) => serde_path_to_error::deserialize(value).map(|Object(v)| v).map_err(|e| input_error(e).within(path)),
    }
}

/// A `T` read from a JSON object only.
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Object)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// For `#[serde(deserialize_with)]` on a field that holds a struct.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Object::deserialize(d).map(|Object(v)| v)
}

/// [`object`], for an optional field (`null` is none).
pub fn object_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<Object<T>>::deserialize(d).map(|o| o.map(|Object(v)| v))
}

/// For a list field that a Go client may send as `null`: Go encodes a slice it never filled
/// so (rekor-cli's `{"entryUUIDs": null, …}`). `null` reads as the empty list, an absent
/// field too (with `#[serde(default)]`); anything else must be a list.
pub fn list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Option::<Vec<T>>::deserialize(d).map(Option::unwrap_or_default)
}

/// [`object`], for a list of structs.
pub fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Vec::<Object<T>>::deserialize(d).map(|v| v.into_iter().map(|Object(x)| x).collect())
}

fn input_error(e: serde_path_to_error::Error<serde_json::Error>) -> InputError {
    let mut path = path_text(e.path());
    let inner = e.inner();
    let syntax = matches!(inner.classify(), serde_json::error::Category::Syntax | serde_json::error::Category::Eof);
    let mut why = without_position(inner);
    // serde names a missing field in its message and the enclosing object in the path; the
    // path of the field itself is what a client wants. (An unknown field's path is its own.)
    if let Some((name, _)) = why.strip_prefix("missing field `").and_then(|rest| rest.split_once('`')) {
        path = join(&path, name);
        why = "required field is missing".into();
    } else if let Some((_, expected)) = why.strip_prefix("unknown field `").and_then(|rest| rest.split_once('`')) {
        why = format!("unknown field;{}", expected.trim_start_matches(','));
    }
    InputError { path, why, syntax }
}

/// `a.b[2].c`; a key that is not a plain name is quoted (`a["x.y"]`, `[""]`), so that every
/// path names one field. An unknown segment (where a syntax error struck) is left out.
fn path_text(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                let plain = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                match (plain, out.is_empty()) {
                    (true, true) => out.push_str(key),
                    (true, false) => out.push_str(&format!(".{key}")),
                    (false, _) => out.push_str(&format!("[{}]", serde_json::Value::String(key.clone()))),
                }
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// serde_json's message without its " at line L column C" (the path says where).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(t) => t.to_string(),
        None => text,
    }
}

/// Bytes sent as base64 (the standard alphabet, padded or not, as [`crate::b64::decode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base64(pub Vec<u8>);

impl<'de> Deserialize<'de> for Base64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let decode = |s: &str| crate::b64::decode(s).map_err(DecodeError::Base64);
        d.deserialize_str(Encoded { expecting: "a base64 string", decode }).map(Base64)
    }
}

/// Bytes sent as hex, either case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hex(pub Vec<u8>);

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let decode = |s: &str| hex::decode(s).map_err(DecodeError::Hex);
        d.deserialize_str(Encoded { expecting: "a hex string", decode }).map(Hex)
    }
}

/// Why an encoded field's string does not decode (the reader adds the field's path).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum DecodeError {
    #[error("not base64: {0}")]
    Base64(#[source] base64::DecodeError),
    #[error("not hex: {0}")]
    Hex(#[source] hex::FromHexError),
}

/// Reads a string holding bytes in some encoding, and decodes it.
struct Encoded<F> {
    expecting: &'static str,
    decode: F,
}

impl<F: Fn(&str) -> Result<Vec<u8>, DecodeError>> Visitor<'_> for Encoded<F> {
    type Value = Vec<u8>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Vec<u8>, E> {
        (self.decode)(s).map_err(E::custom)
    }
}

/// A JSON integer in `0..=i64::MAX`: what a log index or size can be (they are stored as
/// signed 64-bit integers, and protojson clients send int64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Index(pub u64);

impl<'de> Deserialize<'de> for Index {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(d)?;
        match n <= i64::MAX as u64 {
            true => Ok(Index(n)),
            false => Err(D::Error::custom(format_args!("{n} is out of range; expected an integer from 0 to {}", i64::MAX))),
        }
    }
}

/// How the encoded types read from JSON appear in the OpenAPI description.
mod schema {
    use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
    use utoipa::openapi::RefOr;
    use utoipa::{PartialSchema, ToSchema};

    fn string(description: &str, pattern: Option<&str>, encoding: Option<&str>) -> RefOr<Schema> {
        let mut b = ObjectBuilder::new().schema_type(Type::String).description(Some(description));
        if let Some(p) = pattern {
            b = b.pattern(Some(p));
        }
        if let Some(e) = encoding {
            b = b.content_encoding(e);
        }
        b.into()
    }

    impl PartialSchema for super::Base64 {
        fn schema() -> RefOr<Schema> {
            string("bytes, standard base64 (padded or not)", Some("^[A-Za-z0-9+/]*={0,2}$"), Some("base64"))
        }
    }
    impl ToSchema for super::Base64 {}

    impl PartialSchema for super::Hex {
        fn schema() -> RefOr<Schema> {
            string("bytes, hex (either case)", Some("^([0-9a-fA-F]{2})*$"), None)
        }
    }
    impl ToSchema for super::Hex {}

    impl PartialSchema for super::Index {
        fn schema() -> RefOr<Schema> {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .maximum(Some(i64::MAX))
                .description(Some("a log index or size, 0 to 2^63-1"))
                .into()
        }
    }
    impl ToSchema for super::Index {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        #[serde(deserialize_with = "objects")]
        items: Vec<Item>,
        #[serde(default)]
        at: Option<Index>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        data: Base64,
        digest: Option<Hex>,
        #[serde(default, deserialize_with = "object_opt")]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        n: u8,
    }

    fn err(json: &str) -> InputError {
        from_slice::<Outer>(json.as_bytes()).unwrap_err()
    }

    #[test]
    fn reads_a_good_document() {
        let o: Outer = from_slice(br#"{"name":"n","items":[{"data":"aGk=","digest":"ABcd","inner":{"n":1}},{"data":"","inner":null}],"at":7}"#).unwrap();
        assert_eq!(o.items[0].inner.as_ref().map(|i| i.n), Some(1));
        assert!(o.items[1].inner.is_none());
        assert_eq!(o.items[0].data.0, b"hi");
        assert_eq!(o.items[0].digest.as_ref().unwrap().0, vec![0xab, 0xcd]);
        assert_eq!(o.at, Some(Index(7)));
    }

    #[test]
    fn every_error_names_the_path_of_its_field() {
        let cases = [
            (r#"{"name":"n","items":[{"data":"aGk="},{"data":"@@"}]}"#, "items[1].data", "not base64"),
            (r#"{"name":"n","items":[{"data":"aGk=","digest":"xyz"}]}"#, "items[0].digest", "not hex"),
            (r#"{"name":"n","items":[{"data":5}]}"#, "items[0].data", "expected a base64 string"),
            (r#"{"name":"n","items":[{}]}"#, "items[0].data", "required field is missing"),
            (r#"{"name":"n","items":[],"extra":1}"#, "extra", "unknown field; expected one of"),
            (r#"{"name":7,"items":[]}"#, "name", "invalid type: integer `7`, expected a string"),
            (r#"{"name":"n","items":[],"at":-1}"#, "at", "invalid value"),
            (r#"{"name":"n","items":[],"at":1.5}"#, "at", "invalid type: floating point"),
            (r#"{"name":"n","items":[],"at":9223372036854775808}"#, "at", "out of range"),
            (r#"{"items":[]}"#, "name", "required field is missing"),
            (r#"{"":3}"#, r#"[""]"#, "unknown field"),
            (r#"{"name":"n","items":[{"data":"aGk=","a.b":1}]}"#, r#"items[0]["a.b"]"#, "unknown field"),
            (r#"["n",[]]"#, "", "expected a JSON object"),
            (r#"{"name":"n","items":[["aGk="]]}"#, "items[0]", "expected a JSON object"),
            (r#"{"name":"n","items":[{"data":"aGk=","inner":[1]}]}"#, "items[0].inner", "expected a JSON object"),
            (r#"{"name":"n","items":[{"data":"aGk=","inner":{"n":300}}]}"#, "items[0].inner.n", "invalid value"),
        ];
        for (json, path, why) in cases {
            let e = err(json);
            assert_eq!(e.path, path, "{json}: {e}");
            assert!(e.why.contains(why), "{json}: {e}");
            assert!(!e.syntax && !e.why.contains("line"), "{json}: {e}");
        }
        // The decoder's own message follows, as clients have always read it.
        assert_eq!(err(cases[0].0).why, format!("not base64: {}", crate::b64::decode("@@").unwrap_err()));
        assert_eq!(err(cases[1].0).why, format!("not hex: {}", hex::decode("xyz").unwrap_err()));
    }

    #[test]
    fn the_untracked_reading_accepts_and_refuses_what_the_tracked_one_does() {
        let inputs = [
            r#"{"name":"n","items":[{"data":"aGk=","digest":"ABcd","inner":{"n":1}}],"at":7}"#,
            r#"{"name":"n","items":[{"data":"aGk="},{"data":"@@"}]}"#,
            r#"{"name":"n","items":[],"extra":1}"#,
            r#"{"name":"n","items":[]} trailing"#,
            r#"{"name":"n","items":[]}  "#,
            r#"["n",[]]"#,
            r#"{"name":"n","items":[{"data":"aGk=","inner":{"n":300}}]}"#,
            "",
        ];
        for json in inputs {
            let fast = serde_json::from_slice::<Object<Outer>>(json.as_bytes()).is_ok();
            let tracked = from_slice_tracked::<Outer>(json.as_bytes()).is_ok();
            assert_eq!(fast, tracked, "{json}");
            assert_eq!(from_slice::<Outer>(json.as_bytes()).is_ok(), tracked, "{json}");
        }
    }

    #[test]
    fn syntax_errors_are_told_apart() {
        for json in [r#"{"name":"#, "not json", r#"{"name":"n","items":[]} trailing"#, ""] {
            assert!(err(json).syntax, "{json}: {}", err(json));
        }
    }

    #[test]
    fn nested_documents_and_values_carry_the_enclosing_path() {
        let e = from_str_at::<Item>(r#"{"data":"@"}"#, "spec.envelope").unwrap_err();
        assert_eq!(e.path, "spec.envelope.data");
        let e = from_str_at::<Item>("{oops", "spec.envelope").unwrap_err();
        assert_eq!((e.path.as_str(), e.syntax), ("spec.envelope", false));
        assert!(e.why.starts_with("is not JSON"), "{e}");
        let v = serde_json::json!({"name": "n", "items": [{"data": "aGk="}, {"data": 1}]});
        assert_eq!(from_value::<Outer>(&v, "entries[3]").unwrap_err().path, "entries[3].items[1].data");
        assert_eq!(join("a", "[0].b"), "a[0].b");
        assert_eq!(join("", "b"), "b");
        assert_eq!(join("a", ""), "a");
    }

    #[test]
    fn a_list_may_be_null_as_go_sends_it_but_nothing_else() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Lists {
            #[serde(default, deserialize_with = "list")]
            uuids: Vec<String>,
            #[serde(default, deserialize_with = "list")]
            indexes: Vec<Index>,
        }
        let read = |json: &str| from_slice::<Lists>(json.as_bytes()).map(|l| (l.uuids, l.indexes.len()));
        assert_eq!(read(r#"{"uuids":null,"indexes":null}"#).unwrap(), (vec![], 0));
        assert_eq!(read("{}").unwrap(), (vec![], 0));
        assert_eq!(read(r#"{"uuids":["a"],"indexes":[1,2]}"#).unwrap(), (vec!["a".to_string()], 2));
        for (json, path) in [(r#"{"uuids":"a"}"#, "uuids"), (r#"{"uuids":[null]}"#, "uuids[0]"), (r#"{"indexes":{}}"#, "indexes")] {
            let e = read(json).unwrap_err();
            assert_eq!(e.path, path, "{json}: {e}");
        }
    }
}
