//! Lowercase hex encoding. `hex::encode` collects one `char` at a time, which showed up at
//! several percent of CPU on the proof-read path; this writes bytes from a table.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends the lowercase hex of `bytes` to `out`, through a stack buffer (no allocation
/// beyond `out`'s own growth).
pub fn push(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    // Writing to a String cannot fail.
    let _ = write(out, bytes);
}

/// Writes the lowercase hex of `bytes` to a formatter in one `write_str` per 64 bytes, rather
/// than a padded `{:02x}` per byte (a `Display` for ids that every audit record shows).
pub fn write(f: &mut impl std::fmt::Write, bytes: &[u8]) -> std::fmt::Result {
    let mut buf = [0u8; 128];
    for chunk in bytes.chunks(buf.len() / 2) {
        for (pair, b) in buf.chunks_exact_mut(2).zip(chunk) {
            pair[0] = DIGITS[(b >> 4) as usize];
            pair[1] = DIGITS[(b & 15) as usize];
        }
        f.write_str(std::str::from_utf8(&buf[..chunk.len() * 2]).map_err(|_| std::fmt::Error)?)?;
    }
    Ok(())
}

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push(&mut s, bytes);
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_hex_crate() {
        let data: Vec<u8> = (0..=255u8).collect();
        assert_eq!(super::encode(&data), hex::encode(&data));
        let mut s = String::from("x");
        super::push(&mut s, &data[..65]);
        assert_eq!(s, format!("x{}", hex::encode(&data[..65])), "across a chunk boundary");
        let mut w = String::from("y");
        super::write(&mut w, &data).unwrap();
        assert_eq!(w, format!("y{}", hex::encode(&data)), "written to a formatter, across chunks");
    }
}
