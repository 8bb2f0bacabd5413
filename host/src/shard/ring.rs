//! Consistent hashing of object keys to the members of a shard ring.
//!
//! Guarantees: the owner of a key depends only on the key and the set of members, never on the
//! order they were given in or on the process (the hash is FNV-1a, fixed across builds and
//! machines); adding or removing one of N members moves about 1/N of the keys, and only to or
//! from that member.

use std::collections::BTreeSet;

/// Points each member holds on the ring: enough for an even spread among a few dozen members.
const POINTS_PER_MEMBER: u32 = 128;

/// The members of a ring, each at [`POINTS_PER_MEMBER`] points of a 64-bit circle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    /// Sorted by point; ties broken by member name.
    points: Vec<(u64, String)>,
}

impl Ring {
    /// The ring of `members`.
    pub fn new<'a>(members: impl IntoIterator<Item = &'a str>) -> Self {
        let members: BTreeSet<&str> = members.into_iter().collect();
        let mut points: Vec<(u64, String)> = members
            .iter()
            .flat_map(|member| {
                (0..POINTS_PER_MEMBER).map(move |i| {
                    (
                        hash(format!("{member}#{i}").as_bytes()),
                        (*member).to_owned(),
                    )
                })
            })
            .collect();
        points.sort_unstable();
        Self { points }
    }

    /// The member owning `key`: the first point at or after the key's hash, going round.
    /// `None` when the ring has no member.
    pub fn owner(&self, key: &str) -> Option<&str> {
        let at = hash(key.as_bytes());
        let index = self.points.partition_point(|(point, _)| *point < at);
        let (_, member) = self.points.get(index).or_else(|| self.points.first())?;
        Some(member)
    }
}

/// 64-bit FNV-1a, then a finalizer that spreads near keys over the whole circle.
fn hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The finalizer of SplitMix64.
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn keys() -> Vec<String> {
        (0..10_000)
            .map(|i| format!("team-{}/podset-{i}", i % 7))
            .collect()
    }

    fn owners(ring: &Ring) -> Vec<String> {
        keys()
            .iter()
            .map(|k| ring.owner(k).unwrap().to_owned())
            .collect()
    }

    #[test]
    fn an_empty_ring_owns_nothing() {
        assert_eq!(Ring::new([]).owner("a/b"), None);
    }

    #[test]
    fn owners_do_not_depend_on_the_order_of_members() {
        assert_eq!(
            owners(&Ring::new(["a", "b", "c"])),
            owners(&Ring::new(["c", "a", "b"]))
        );
    }

    #[test]
    fn the_hash_is_fixed() {
        // FNV-1a of "a" is 0xaf63dc4c8601ec8c; a change of the hash would move every key of
        // every ring when replicas of two versions run side by side.
        assert_eq!(hash(b"a"), {
            let h: u64 = 0xaf63_dc4c_8601_ec8c;
            let h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^ (h >> 31)
        });
    }

    #[test]
    fn keys_spread_evenly_and_a_new_member_takes_only_its_share() {
        let three = owners(&Ring::new(["m-0", "m-1", "m-2"]));
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for owner in &three {
            *counts.entry(owner).or_default() += 1;
        }
        for (member, count) in &counts {
            assert!(
                (2_600..=4_100).contains(count),
                "{member} owns {count} of 10000"
            );
        }
        let four = owners(&Ring::new(["m-0", "m-1", "m-2", "m-3"]));
        let moved: Vec<_> = three.iter().zip(&four).filter(|(a, b)| a != b).collect();
        assert!(
            moved.iter().all(|(_, to)| *to == "m-3"),
            "keys moved between old members"
        );
        assert!(
            (1_800..=3_300).contains(&moved.len()),
            "{} of 10000 keys moved to a fourth member",
            moved.len()
        );
        let two = owners(&Ring::new(["m-0", "m-2"]));
        let moved = three.iter().zip(&two).filter(|(a, b)| a != b);
        assert!(
            moved.into_iter().all(|(from, _)| from == "m-1"),
            "only m-1's keys move"
        );
    }
}
