//! Passwords (argon2id) and random secrets (the OS generator).

use crate::error::{Error, Result};
use argon2::{
    Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
    password_hash::{SaltString, rand_core::OsRng, rand_core::RngCore},
};

/// An argon2id PHC string for `password`, with a fresh salt and the crate's default costs
/// (19 MiB, 2 passes, 1 lane: OWASP's minimum for argon2id).
pub fn hash(password: &str) -> Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|err| Error::Internal(format!("hashing a password: {err}")))
}

/// Checks `password` against `phc`. With no hash (no such user, or a proxy-only user) it still
/// spends the time of one verification, so timing does not tell which usernames exist.
pub fn verify(password: &str, phc: Option<&str>) -> bool {
    let parsed = phc.and_then(|phc| PasswordHash::new(phc).ok());
    match parsed {
        Some(hash) => Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok(),
        None => {
            let _ = Argon2::default()
                .hash_password(password.as_bytes(), &SaltString::generate(&mut OsRng));
            false
        }
    }
}

/// `bytes` random bytes from the OS, hex-encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    OsRng.fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`, hex-encoded.
pub fn keyed_hash(key: &[u8], message: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// A password for people to type once: 20 characters without look-alikes (~115 bits).
pub fn generate() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut buf = [0u8; 20];
    OsRng.fill_bytes(&mut buf);
    // 256 % 56 != 0 leaves a slight bias towards the first characters; 115 bits is plenty.
    buf.iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_argon2id_salted_and_verify() {
        let a = hash("correct horse battery").expect("hash");
        let b = hash("correct horse battery").expect("hash");
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "salted");
        assert!(verify("correct horse battery", Some(&a)));
        assert!(!verify("correct horse batterz", Some(&a)));
        assert!(!verify("anything", None));
        assert!(!verify("anything", Some("not a phc string")));
    }

    #[test]
    fn keyed_hashes_are_rfc_4231_hmac_sha_256() {
        // RFC 4231, test cases 2 and 6 (a key longer than the block).
        assert_eq!(
            keyed_hash(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            keyed_hash(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn secrets_are_random_and_well_formed() {
        let token = random_hex(32);
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(random_hex(32), token);
        let password = generate();
        assert_eq!(password.chars().count(), 20);
        assert_ne!(generate(), password);
    }
}
