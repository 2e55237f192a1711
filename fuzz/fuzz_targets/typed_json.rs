//! Typed JSON input (`signet_core::wire`), as every JSON body is read: never a panic, a
//! JSON path on every shape error, and agreement with serde_json on what is JSON at all.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use signet_core::wire::{self, Base64, Hex, Index};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Doc {
    name: Option<String>,
    #[serde(default, deserialize_with = "wire::objects")]
    items: Vec<Item>,
    #[serde(default)]
    at: Option<Index>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Item {
    data: Option<Base64>,
    digest: Option<Hex>,
    #[serde(default, deserialize_with = "wire::object_opt")]
    inner: Option<Box<Doc>>,
}

fuzz_target!(|data: &[u8]| {
    let typed = wire::from_slice::<Doc>(data);
    let json = serde_json::from_slice::<serde_json::Value>(data);
    match (&typed, &json) {
        (Err(e), Ok(_)) => assert!(!e.syntax, "valid JSON called a syntax error: {e}"),
        (Ok(_), Err(e)) => panic!("accepted what serde_json refuses: {e}"),
        _ => {}
    }
    if let (Err(e), Ok(serde_json::Value::Object(_))) = (&typed, &json) {
        // Inside an object, a shape error names a field.
        assert!(!e.path.is_empty() || e.why.contains("JSON object"), "no path: {e}");
    }
});
