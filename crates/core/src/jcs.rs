//! RFC 8785 JSON Canonicalization Scheme, for the documents signet builds itself.
//!
//! signet only canonicalizes values it constructed (strings, integers, booleans, objects,
//! arrays; never floats), and for those serde_json already emits JCS once object keys are
//! sorted: it escapes exactly `"`, `\`, and control characters (short forms for \b \f \n \r \t,
//! `\u00xx` lowercase otherwise) and writes no insignificant whitespace. Keys are ASCII, so
//! byte order equals the UTF-16 order that RFC 8785 §3.2.3 asks for.

use serde::Serialize;
use serde_json::Value;

/// Canonical JSON bytes of `value`.
pub fn to_vec<T: Serialize>(value: &T) -> Vec<u8> {
    let v = serde_json::to_value(value).expect("signet's own types always serialize");
    let mut out = Vec::with_capacity(256);
    write_value(&v, &mut out);
    out
}

fn write_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            // Sort explicitly: serde_json's map order depends on a crate feature that any
            // dependency may switch on.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k).expect("write to Vec");
                out.push(b':');
                write_value(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("write to Vec"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn sorts_keys_and_strips_whitespace() {
        let v = json!({"spec": {"b": 1, "a": [true, null, "x"]}, "apiVersion": "0.0.1", "kind": "k"});
        assert_eq!(
            String::from_utf8(super::to_vec(&v)).unwrap(),
            r#"{"apiVersion":"0.0.1","kind":"k","spec":{"a":[true,null,"x"],"b":1}}"#
        );
    }

    #[test]
    fn escapes_like_rfc8785() {
        let v = json!({"s": "\u{8}\t\n\u{1f}\"\\/é€"});
        assert_eq!(
            String::from_utf8(super::to_vec(&v)).unwrap(),
            "{\"s\":\"\\b\\t\\n\\u001f\\\"\\\\/é€\"}"
        );
    }
}
