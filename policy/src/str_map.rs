//! [`StrMap`]: a string-keyed hash map that keeps its keys in one buffer.
//!
//! The evaluator indexes every `params` entry of a plan (about ten per rule). With
//! `HashMap<Box<str>, _>` each key is an allocation of its own: for large plans those allocations
//! were much of the time and memory of loading (and memory is slow to grow in a Wasm VM).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Insert-only map from strings to `V`. Keys are hashed with foldhash keyed by a random seed, so probe
/// sequences differ from process to process. foldhash resists casual, not determined, collision
/// crafting, which is enough here: the keys come from the plan (its authors are the platform team)
/// and a caller only chooses what is looked up, one probe sequence per lookup. Not std's SipHash: the
/// filter hashes the tool name and the caller on every request, and SipHash costs several times more
/// in the Wasm VM.
#[derive(Debug)]
pub struct StrMap<V> {
    hasher: foldhash::quality::FixedState,
    /// The keys, one after the other.
    text: String,
    entries: Vec<Entry<V>>,
    /// Open addressing with linear probing: 1 + index in `entries`, 0 = free. At least twice as
    /// long as `entries`, which keeps probe sequences short, also for keys that are not there.
    slots: Vec<usize>,
}

#[derive(Debug)]
struct Entry<V> {
    /// End of the key in `text`; it starts where the previous entry's ends.
    end: usize,
    /// The key's hash (truncated): probes compare keys only when it is the one looked for.
    hash: u32,
    value: V,
}

/// One random key per process: std's RandomState is seeded from the OS (WASI `random_get` in the
/// VM), and one hash of it is a random 64-bit number.
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| RandomState::new().hash_one(0u8))
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        Self {
            hasher: foldhash::quality::FixedState::with_seed(seed()),
            text: String::new(),
            entries: Vec::new(),
            slots: Vec::new(),
        }
    }
}

impl<V> StrMap<V> {
    /// Room for `keys` keys of `key_bytes` bytes in all.
    pub fn with_capacity(keys: usize, key_bytes: usize) -> Self {
        let mut map = Self {
            text: String::with_capacity(key_bytes),
            entries: Vec::with_capacity(keys),
            ..Self::default()
        };
        if keys > 0 {
            map.rehash(2 * keys);
        }
        map
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.get_key_value(key).map(|(_, v)| v)
    }

    /// The value of the key spelled by `key` (bytes that are not UTF-8 are no key).
    pub fn get_bytes(&self, key: &[u8]) -> Option<&V> {
        if self.entries.is_empty() {
            return None;
        }
        let index = self.find(key, self.hash(key)).ok()?;
        Some(&self.entries.get(index)?.value)
    }

    /// The stored key (equal to `key`) and its value.
    pub fn get_key_value(&self, key: &str) -> Option<(&str, &V)> {
        if self.entries.is_empty() {
            // Saves hashing: the evaluator looks keys up in many empty maps.
            return None;
        }
        let index = self.find(key.as_bytes(), self.hash(key.as_bytes())).ok()?;
        Some((self.key(index)?, &self.entries.get(index)?.value))
    }

    /// The value of `key`, `new()` inserted first if the key is missing.
    pub fn get_or_insert_with(&mut self, key: &str, new: impl FnOnce() -> V) -> &mut V {
        if self.slots.len() < 2 * (self.entries.len() + 1) {
            self.rehash((2 * self.slots.len()).max(4));
        }
        let hash = self.hash(key.as_bytes());
        let index = match self.find(key.as_bytes(), hash) {
            Ok(index) => index,
            Err(free) => {
                self.text.push_str(key);
                self.entries.push(Entry {
                    end: self.text.len(),
                    hash,
                    value: new(),
                });
                if let Some(slot) = self.slots.get_mut(free) {
                    *slot = self.entries.len();
                }
                self.entries.len() - 1
            }
        };
        // In range: found, or just pushed.
        &mut self.entries[index].value
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|e| &e.value)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|e| &mut e.value)
    }

    fn key(&self, index: usize) -> Option<&str> {
        let start = self
            .entries
            .get(index.wrapping_sub(1))
            .map_or(0, |previous| previous.end);
        self.text.get(start..self.entries.get(index)?.end)
    }

    fn hash(&self, key: &[u8]) -> u32 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(key);
        hasher.finish() as u32
    }

    /// Ok(index in `entries`) of `key`, or Err(the free slot where it would go).
    fn find(&self, key: &[u8], hash: u32) -> Result<usize, usize> {
        let mut slot = first_slot(hash, self.slots.len());
        // Ends: at most half of the slots are taken (and with no slots, `get` is None at once).
        loop {
            let index = match self.slots.get(slot) {
                None | Some(0) => return Err(slot),
                Some(taken) => taken - 1,
            };
            if let Some(entry) = self.entries.get(index).filter(|e| e.hash == hash) {
                let start = self
                    .entries
                    .get(index.wrapping_sub(1))
                    .map_or(0, |previous| previous.end);
                if self.text.as_bytes().get(start..entry.end) == Some(key) {
                    return Ok(index);
                }
            }
            slot = if slot + 1 == self.slots.len() {
                0
            } else {
                slot + 1
            };
        }
    }

    fn rehash(&mut self, slots: usize) {
        self.slots = vec![0; slots];
        for (index, entry) in self.entries.iter().enumerate() {
            // Keys are distinct: the first free slot.
            let mut slot = first_slot(entry.hash, slots);
            while self.slots.get(slot).is_some_and(|&taken| taken != 0) {
                slot = if slot + 1 == slots { 0 } else { slot + 1 };
            }
            if let Some(free) = self.slots.get_mut(slot) {
                *free = index + 1;
            }
        }
    }
}

/// Where probing for `hash` starts among `slots` slots: the hash scaled to 0..slots (the high
/// bits decide), so that any number of slots works, not only powers of two.
fn first_slot(hash: u32, slots: usize) -> usize {
    // Exact while there are fewer than 2^32 slots.
    (u64::from(hash).wrapping_mul(slots as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn agrees_with_a_hash_map() {
        // Keys that are prefixes of one another, the empty key, non-ASCII keys; some repeated.
        let mut keys: Vec<String> = (0..3000)
            .map(|i| format!("{}{}", "é".repeat(i % 3), i % 1700 / 3))
            .collect();
        keys.insert(1000, String::new());
        keys.push(String::new());
        for mut map in [
            StrMap::default(),
            StrMap::with_capacity(2000, 10_000),
            StrMap::with_capacity(1, 1),
        ] {
            let mut reference = HashMap::new();
            for (i, key) in keys.iter().enumerate() {
                assert_eq!(map.get(key), reference.get(key.as_str()));
                *map.get_or_insert_with(key, || i) += 1;
                *reference.entry(key.as_str()).or_insert(i) += 1;
            }
            for key in &keys {
                assert_eq!(
                    map.get_key_value(key),
                    reference.get_key_value(key.as_str()).map(|(k, v)| (*k, v))
                );
            }
            assert_eq!(map.get("absent"), None);
            let mut values: Vec<usize> = map.values_mut().map(|v| *v).collect();
            let mut expected: Vec<usize> = reference.into_values().collect();
            values.sort_unstable();
            expected.sort_unstable();
            assert_eq!(values, expected);
        }
        assert_eq!(StrMap::<()>::default().get(""), None);
    }
}
