//! RFC 3161 `TimeStampReq` DER on `POST /api/v1/timestamp`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = signet_ca::tsa::Tsa::parse_der(data);
});
