//! Random object names, like the API server's `generateName`.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::time::{SystemTime, UNIX_EPOCH};

/// The API server's alphabet for generated names: no vowels (no words), no look-alikes.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Longest base kept, so that base plus suffix fits in 63 characters.
const MAX_BASE: usize = 58;
const SUFFIX: usize = 5;

/// `base` followed by 5 random characters, e.g. `generate_name("web-")` → `web-x7k2p`.
///
/// Server-side apply has no `generateName`, so guests name new objects themselves. `base` is
/// truncated to 58 bytes as the API server does. Randomness comes from the WASI random source
/// (through std's hash seeds) mixed with the wall clock; not suitable for secrets. Check the
/// cache for an existing object of the same name before applying, since an apply to an existing
/// name updates that object.
pub fn generate_name(base: &str) -> String {
    let mut cut = base.len().min(MAX_BASE);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut bits = hasher.finish();
    let mut name = String::with_capacity(cut + SUFFIX);
    name.push_str(&base[..cut]);
    for _ in 0..SUFFIX {
        let len = ALPHABET.len() as u64;
        name.push(char::from(ALPHABET[(bits % len) as usize]));
        bits /= len;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_five_characters_from_the_alphabet() {
        let name = generate_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("web-"));
        assert!(name[4..].bytes().all(|b| ALPHABET.contains(&b)));
        assert_ne!(generate_name("web-"), generate_name("web-"));
    }

    #[test]
    fn truncates_long_bases() {
        assert_eq!(generate_name(&"a".repeat(70)).len(), 63);
        assert_eq!(generate_name(&"é".repeat(40)).len(), 58 + 5);
    }
}
