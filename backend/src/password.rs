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
