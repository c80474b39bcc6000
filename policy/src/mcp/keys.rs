//! Duplicate keys of the MCP reader's open objects: small objects compare their keys linearly,
//! big ones keep a per-depth open-addressing table of 32-bit hashes and body offsets, and objects
//! whose keys collide adversarially fall back to sorting when they close. Here: the keys, their
//! hashes and the tables; the parser runs the check on its open objects (`Parser::check_new_key`
//! and `Parser::deferred_dup_check`, in parser.rs).

use super::scan::{decode_into, scan_string};
use super::NotMcp;

/// Objects with more keys than this switch from linear duplicate search to a hash table.
pub(super) const HASH_THRESHOLD: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum DupMode {
    /// Compare each new key against the object's keys.
    Linear,
    /// Keys are indexed in the per-depth hash table.
    Hashed,
    /// Too many collisions (adversarial keys): sort and compare when the object closes.
    Deferred,
}

/// A key of an open object: its decoded bytes live in the body (no escapes) or in the arena.
#[derive(Clone, Copy, Debug)]
pub(super) struct Key {
    pub(super) start: usize,
    pub(super) end: usize,
    /// Offset of the key's opening quote in the body.
    pub(super) offset: usize,
    /// The first (up to) eight decoded bytes, little-endian, zero-padded: with the length, this
    /// decides equality of short keys without touching their bytes, and rejects most others.
    pub(super) fp: u64,
    /// Word-sized on purpose: a byte-sized flag makes copies of a freshly built `Key` stall on
    /// store forwarding.
    pub(super) src: KeySrc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(super) enum KeySrc {
    Body,
    Arena,
}

impl Key {
    #[inline]
    fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }
}

/// `src[start..end]`'s first eight bytes (fewer if shorter) as a zero-padded little-endian u64.
#[inline]
pub(super) fn prefix8(src: &[u8], start: usize, end: usize) -> u64 {
    let n = end.saturating_sub(start).min(8);
    let mask = if n == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    };
    if let Some(chunk) = src.get(start..start.wrapping_add(8)) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        u64::from_le_bytes(w) & mask
    } else {
        let mut v = 0u64;
        for (i, &c) in src.get(start..start + n).unwrap_or(&[]).iter().enumerate() {
            v |= u64::from(c) << (8 * i);
        }
        v
    }
}

/// Whether two keys (of the same object) are equal, fingerprint first.
#[inline]
pub(super) fn same_key(body: &[u8], arena: &[u8], a: &Key, b: &Key) -> bool {
    a.fp == b.fp
        && a.len() == b.len()
        && (a.len() <= 8 || key_bytes(body, arena, a) == key_bytes(body, arena, b))
}

#[cold]
pub(super) fn dup_error(body: &[u8], arena: &[u8], k: &Key) -> NotMcp {
    let text = String::from_utf8_lossy(key_bytes(body, arena, k));
    // One character more than is shown, so that the message marks the cut.
    let key = match text.char_indices().nth(crate::log_safe::MAX_SHOWN + 1) {
        Some((i, _)) => text.get(..i).unwrap_or("").to_string(),
        None => text.into_owned(),
    };
    NotMcp::DuplicateKey {
        key,
        offset: k.offset,
    }
}

/// Folded 64x64->128 multiply: a fast mixer with good avalanche in the low 32 bits.
#[inline]
pub(super) fn fold_mul(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// 32-bit hash of a key's decoded bytes. Not keyed: adversarial collisions are handled by the
/// probe budget in `add_key`, which falls back to sorting.
#[inline]
pub(super) fn key_hash(body: &[u8], arena: &[u8], k: &Key) -> u32 {
    const K1: u64 = 0x9E37_79B9_7F4A_7C15;
    const K2: u64 = 0xD6E8_FEB8_6659_FD93;
    let mut h = fold_mul(k.fp ^ K2, K1 ^ k.len() as u64);
    if k.len() > 8 {
        let bytes = key_bytes(body, arena, k);
        let mut chunks = bytes.get(8..).unwrap_or(&[]).chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = fold_mul(h ^ u64::from_le_bytes(w), K1);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            if let Some(dst) = w.get_mut(..rest.len()) {
                dst.copy_from_slice(rest);
            }
            h = fold_mul(h ^ u64::from_le_bytes(w), K2);
        }
    }
    h as u32
}

#[inline]
pub(super) fn key_bytes<'x>(body: &'x [u8], arena: &'x [u8], k: &Key) -> &'x [u8] {
    let src = if k.src == KeySrc::Arena { arena } else { body };
    src.get(k.start..k.end).unwrap_or(&[])
}

/// A hash-table entry: the key's 32-bit hash in the high half, the body offset of its opening
/// quote + 1 in the low half (0 = empty slot). Only used for bodies under 4 GiB.
#[inline]
pub(super) fn table_entry(h: u32, offset: usize) -> u64 {
    (u64::from(h) << 32) | (offset as u64 + 1)
}

#[inline]
pub(super) fn entry_offset(e: u64) -> usize {
    (e as u32 as usize).wrapping_sub(1)
}

/// Insert an entry into an open-addressing table (at most half full).
#[inline]
pub(super) fn table_insert(table: &mut [u64], mask: usize, entry: u64) {
    let mut slot = ((entry >> 32) as usize) & mask;
    while let Some(e) = table.get_mut(slot) {
        if *e == 0 {
            *e = entry;
            return;
        }
        slot = (slot + 1) & mask;
    }
}

/// The decoded bytes of the (already validated) key whose opening quote is at `offset`.
pub(super) fn stored_key_bytes<'x>(s: &'x str, offset: usize, scratch: &'x mut String) -> &'x [u8] {
    let b = s.as_bytes();
    let (close, escaped) = scan_string(b, offset).unwrap_or((offset, false));
    let raw = s.get(offset + 1..close).unwrap_or("");
    if escaped {
        scratch.clear();
        decode_into(raw, scratch);
        scratch.as_bytes()
    } else {
        raw.as_bytes()
    }
}

/// Grow the table fourfold (fewer rehashes of big objects), re-inserting entries by their stored
/// hash. `vec![0; n]` lets the allocator hand out already-zeroed memory.
pub(super) fn grow_table(table: &mut Vec<u64>) {
    let old = std::mem::replace(table, vec![0u64; (table.len() * 4).max(64)]);
    let mask = table.len() - 1;
    for e in old {
        if e != 0 {
            table_insert(table, mask, e);
        }
    }
}
