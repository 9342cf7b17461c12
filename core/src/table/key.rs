//! A tenant's key words: a short id packed, a long one fingerprinted.

use crate::sync::StdArc;
use siphasher::sip128::SipHasher13;
#[cfg(not(loom))]
use std::hash::BuildHasher;

/// Seeded per table, so tenant ids chosen by callers cannot be aimed at one
/// shard. Under loom a fixed seed: a model's executions must replay the
/// same operations, and some paths (eviction's scan order) follow hashes.
///
/// foldhash's `quality` variant: one more folded multiply than `fast`,
/// whose single multiply of an id's two words left ids that differ in a
/// few bytes bunched in some index buckets for some seeds (up to a third
/// of 1,000 such ids out of the index; see
/// `c9_structured_ids_spread_over_homes_and_index_buckets_whatever_the_seed`).
#[cfg(not(loom))]
pub(super) type TableHasher = foldhash::quality::RandomState;
#[cfg(loom)]
pub(super) type TableHasher = foldhash::quality::FixedState;

/// Longest tenant id a partition keeps itself (see [`pack_key`]).
pub(super) const PART_KEY: usize = 15;

/// The key of a table's long-id fingerprints: random per table, fixed
/// under loom (see [`TableHasher`]).
#[cfg(not(loom))]
pub(super) fn fingerprint_keys() -> SipHasher13 {
    // std's RandomState draws its keys from the OS; two of its outputs are
    // as unpredictable as they are.
    let s = std::hash::RandomState::new();
    SipHasher13::new_with_keys(s.hash_one(0u8), s.hash_one(1u8))
}
#[cfg(loom)]
pub(super) fn fingerprint_keys() -> SipHasher13 {
    SipHasher13::new_with_keys(0x5eed_0000_0000_0001, 0x5eed_0000_0000_0002)
}

/// A partition's key words for an id longer than [`PART_KEY`]: 120 bits of
/// the id's keyed SipHash-1-3, with 0xff in the last byte where a packed
/// short id has its length (1 to 15), so the two forms never meet. SipHash
/// is a PRF: without the table's random key, two distinct ids share a
/// fingerprint with probability 2^-120, however they were chosen.
pub(super) fn fingerprint(keys: &SipHasher13, tenant: &str) -> [u64; 2] {
    let h = keys.hash(tenant.as_bytes());
    [h.h1, h.h2 | FINGERPRINT_MARK << 56]
}

/// The last byte of a fingerprint's key words (see [`fingerprint`]).
pub(super) const FINGERPRINT_MARK: u64 = 0xff;

/// Whether key words are a long id's fingerprint, not a packed short id.
#[inline(always)]
pub(super) fn is_fingerprint(key: [u64; 2]) -> bool {
    key[1] >> 56 == FINGERPRINT_MARK
}

/// A tenant id of 1 to [`PART_KEY`] bytes as two words: the bytes, zero
/// padded, little-endian, with the length in the last byte. Never all
/// zeros, which a partition holds while it has no owner. Built from
/// overlapping loads rather than a copy into a buffer:
/// reading a buffer back as words right after byte-wise stores into it
/// stalls store forwarding, a third of a short lookup's time.
#[inline]
pub(super) fn pack_key(tenant: &str) -> Option<[u64; 2]> {
    let b = tenant.as_bytes();
    let n = b.len();
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let half = |at: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(
            b.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    let byte = |at: usize| -> Option<u64> { b.get(at).map(|&x| u64::from(x)) };
    // Overlapping reads put equal bytes in equal places, so OR joins them.
    let (lo, hi) = match n {
        0 => return None,
        1..=3 => (
            byte(0)? | byte(n / 2)? << (8 * (n / 2)) | byte(n - 1)? << (8 * (n - 1)),
            0,
        ),
        4..=7 => (half(0)? | half(n - 4)? << (8 * (n - 4)), 0),
        8 => (word(0)?, 0),
        9..=PART_KEY => (word(0)?, word(n - 8)? >> (8 * (16 - n))),
        _ => return None,
    };
    Some([lo, hi | (n as u64) << 56])
}

/// The id [`pack_key`] packed (cold paths).
pub(super) fn unpack_key(key: [u64; 2]) -> Option<StdArc<str>> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&key[0].to_le_bytes());
    b[8..].copy_from_slice(&key[1].to_le_bytes());
    let len = usize::from(b[15]).min(PART_KEY);
    std::str::from_utf8(&b[..len]).ok().map(StdArc::from)
}
