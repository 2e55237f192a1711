//! Fulcio's gRPC requests as the server reads them: one length-prefixed frame
//! (`signet_core::grpc::unary_message`), then the prost message of each method.
//!
//! - A frame is accepted only when its length is exactly what follows, uncompressed.
//! - Whatever decodes encodes again, framed, to bytes that decode to the same message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use prost::Message;
use signet_core::grpc::{fulcio as pb, frame, unary_message, PREFIX_LEN};

fn round_trips<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(message) = M::decode(bytes) {
        let framed = frame(&message);
        let again = M::decode(unary_message(&framed).expect("a frame we made reads back")).expect("what we encoded decodes");
        assert_eq!(again, message);
    }
}

fuzz_target!(|data: &[u8]| {
    match unary_message(data) {
        Ok(message) => {
            assert_eq!(data.len(), message.len() + PREFIX_LEN);
            assert_eq!(data[0], 0, "only uncompressed frames are read");
            round_trips::<pb::CreateSigningCertificateRequest>(message);
            round_trips::<pb::GetTrustBundleRequest>(message);
            round_trips::<pb::GetConfigurationRequest>(message);
        }
        Err(_) => {
            // The bytes as a bare message too: the decoders see every shape this way.
            round_trips::<pb::CreateSigningCertificateRequest>(data);
        }
    }
});
