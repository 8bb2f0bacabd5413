//! A module's bytes as loads pass them around: hashed once, and shared rather than copied, so
//! that a thousand controllers loading one large module at once hold one copy of it.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, Weak};

/// SHA-256 of `bytes`, lowercase hex: the digest modules are known and cached by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A module's bytes and their SHA-256 (hex), the name modules are known by. Clones share
/// the bytes.
#[derive(Clone)]
pub struct ModuleBytes {
    digest: String,
    bytes: Arc<Vec<u8>>,
}

impl ModuleBytes {
    /// `bytes`, hashed.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            digest: sha256_hex(&bytes),
            bytes: Arc::new(bytes),
        }
    }

    /// `bytes` whose SHA-256 the caller has checked is `digest`: the digest decides which
    /// compiled code runs them.
    pub(crate) fn checked(digest: String, bytes: Vec<u8>) -> Self {
        debug_assert_eq!(
            sha256_hex(&bytes),
            digest,
            "checked bytes match their digest"
        );
        Self {
            digest,
            bytes: Arc::new(bytes),
        }
    }

    /// The SHA-256 of the bytes, hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether `self` and `other` share their bytes (not merely equal ones).
    pub fn shares(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.bytes, &other.bytes)
    }
}

impl Deref for ModuleBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for ModuleBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ModuleBytes(sha256:{}, {} bytes)",
            self.digest,
            self.len()
        )
    }
}

/// The modules some load still holds, by digest: a later fetch of one of them shares its
/// bytes instead of reading them again. Holds none of them alive itself.
#[derive(Default)]
pub struct Held(Mutex<HashMap<String, Weak<Vec<u8>>>>);

impl Held {
    /// The bytes with SHA-256 `digest`, while a load holds them.
    pub fn get(&self, digest: &str) -> Option<ModuleBytes> {
        let held = self.0.lock().expect("held modules lock");
        let bytes = held.get(digest)?.upgrade()?;
        Some(ModuleBytes {
            digest: digest.to_owned(),
            bytes,
        })
    }

    /// Offers `bytes` to later fetches for as long as a load holds them.
    pub fn hold(&self, bytes: &ModuleBytes) {
        let mut held = self.0.lock().expect("held modules lock");
        held.retain(|_, bytes| bytes.strong_count() > 0);
        held.insert(bytes.digest.clone(), Arc::downgrade(&bytes.bytes));
    }
}

/// One async lock per key, made on first use; a lock nobody holds or waits for is dropped at
/// the next [`KeyedLocks::lock`].
#[derive(Clone)]
pub struct KeyedLocks<K = String>(Arc<Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>>);

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

impl<K: std::hash::Hash + Eq> KeyedLocks<K> {
    /// Waits for the lock of `key`, in the order asked.
    pub async fn lock(&self, key: K) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().expect("keyed locks lock");
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry(key).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_known_by_the_sha256_of_their_bytes() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn held_bytes_are_shared_while_a_load_holds_them_and_forgotten_after() {
        let held = Held::default();
        let bytes = ModuleBytes::new(b"\0asm module".to_vec());
        held.hold(&bytes);
        let again = held.get(bytes.digest()).expect("held while alive");
        assert!(again.shares(&bytes));
        assert_eq!(again.digest(), bytes.digest());
        drop((bytes, again));
        assert!(held.get(&sha256_hex(b"\0asm module")).is_none());
    }

    #[tokio::test]
    async fn a_keyed_lock_makes_the_same_key_wait_and_no_other() {
        let locks = KeyedLocks::<&str>::default();
        let first = locks.lock("a").await;
        let other = tokio::time::timeout(std::time::Duration::from_secs(1), locks.lock("b")).await;
        assert!(other.is_ok(), "another key waits for none");
        let same =
            tokio::time::timeout(std::time::Duration::from_millis(50), locks.lock("a")).await;
        assert!(same.is_err(), "the same key waits");
        drop(first);
        let _same = locks.lock("a").await;
    }
}
