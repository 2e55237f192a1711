//! What a witness reads from anyone (c2sp.org/tlog-witness): `add-checkpoint` bodies; and
//! what operators and verifiers read: note verifier keys and witness policies.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = signet_witness::request::AddCheckpoint::parse(data) {
        // What parses writes back to a body that parses to the same request.
        let again = signet_witness::request::format(request.old_size, &request.proof, &note_text(&request.note));
        let reparsed = signet_witness::request::AddCheckpoint::parse(again.as_bytes()).expect("a formatted body parses");
        assert_eq!((reparsed.old_size, reparsed.proof), (request.old_size, request.proof));
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(vkey) = signet_core::notekey::VerifierKey::parse(text) {
        assert_eq!(signet_core::notekey::VerifierKey::parse(&vkey.to_string()).as_ref(), Ok(&vkey));
    }
    let _ = signet_verify::witnesses::WitnessPolicy::parse(text);
});

fn note_text(note: &signet_core::note::SignedNote) -> String {
    let lines: String = note.signatures.iter().map(signet_core::notekey::signature_line).collect();
    format!("{}\n{lines}", note.text)
}
