//! Randomness: fault decisions as a reproducible hash of their inputs ([`seeded_f64`]),
//! identifiers (UUIDs, MACs) from fastrand, and the ticket-signing secret from the OS through
//! getrandom, never from a fallback generator.

/// FNV-1a of a string: a stable hash (std's hashers are randomly keyed or unstable).
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A reproducible draw in `[0, 1)` for `seed`: SplitMix64's output function, a stateless mix
/// of the key the fault draws hash together (seed, fault kind, request key, count). Not
/// `fastrand::Rng::with_seed(seed).f64()`: the first output of its generator over such
/// structured seeds let a seeded fault run meet no fault at all in about one run in six (the
/// e2e test `retryable_faults_and_lock_contention_still_converge_within_three_cycles`).
pub fn seeded_f64(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// `n` bytes of the OS's randomness, for secrets.
pub fn os_random_bytes(n: usize) -> Result<Vec<u8>, getrandom::Error> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)?;
    Ok(buf)
}

/// `n` random bytes for identifiers that need to be unlikely to collide, not secret.
pub fn random_bytes(n: usize) -> Vec<u8> {
    std::iter::repeat_with(|| fastrand::u8(..))
        .take(n)
        .collect()
}

/// A random UUID (version 4) in lowercase hex form.
pub fn uuid() -> String {
    let mut b = random_bytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Standard base64 without padding (PVE's ticket signatures and CSRF tokens look like this).
pub fn base64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_reproducible_and_uuids_are_v4() {
        assert_eq!(seeded_f64(42), seeded_f64(42));
        assert_ne!(seeded_f64(42), seeded_f64(43));
        assert!((0.0..1.0).contains(&seeded_f64(7)));
        let u = uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        assert_eq!(base64(b"abcd"), "YWJjZA");
        assert_eq!(os_random_bytes(32).map(|b| b.len()).ok(), Some(32));
    }
}
