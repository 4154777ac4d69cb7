//! MD5 and SHA-1 in lowercase hex: download-url's and upload's `checksum-algorithm` (PVE accepts
//! both) and the config digests PVE computes with SHA-1 (`/cluster/mapping`, HA, SDN, join).

use sha1::Digest;

/// MD5 of data, lowercase hex.
pub(crate) fn md5_hex(data: &[u8]) -> String {
    hex::encode(md5::Md5::digest(data))
}

/// SHA-1 of data, lowercase hex.
pub(crate) fn sha1_hex(data: &[u8]) -> String {
    hex::encode(sha1::Sha1::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // RFC 1321 and FIPS 180-1 test vectors.
        assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    }
}
