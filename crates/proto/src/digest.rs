//! SHA-256 and its hex text, for every hash a Toolplane process makes on a request's path (the
//! executor call's signature, API key hashes, the cancel key). aws-lc's (the TLS stack's
//! already): its assembly uses the CPU's SHA extensions, or vector instructions where there are
//! none, where a portable implementation took a tenth of a `tools/call`'s instructions.

use aws_lc_rs::digest;

/// The SHA-256 of `parts`, one after another.
pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hash = digest::Context::new(&digest::SHA256);
    for part in parts {
        hash.update(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(hash.finish().as_ref());
    out
}

/// `bytes` as lowercase hex, into a string of its own (one allocation, no per-character push).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    // `hex::encode` pushes a character at a time; into a slice it is a table look-up per byte.
    match ::hex::encode_to_slice(bytes, &mut out) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => unreachable!("the output holds two digits per byte"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_agrees_with_the_hex_crate() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&bytes), ::hex::encode(&bytes));
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn sha256_of_parts_is_the_sha256_of_their_concatenation() {
        use sha2::Digest as _;
        let whole: [u8; 32] = sha2::Sha256::digest(b"abc\0def").into();
        assert_eq!(sha256(&[b"abc", b"\0", b"def"]), whole);
        assert_eq!(
            hex(&sha256(&[])),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
