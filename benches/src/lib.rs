//! Shared pieces of the breakerbank benchmarks (issue 7).
//!
//! The benchmarks themselves are `benches/breakerbank.rs` (criterion,
//! single thread), `examples/contended.rs` (std threads on one shared
//! breaker) and `examples/scale.rs` (tenant count and memory). This
//! library holds the profiles they share, so every harness measures the
//! same configuration.

use breakerbank::{Bank, Dependency, Profile};

/// A global dependency tripping on `n` consecutive failures; open for an
/// hour so an open breaker stays open for a whole measurement.
pub fn consecutive_yaml(n: u32, open: &str, probe_budget: u32) -> String {
    format!(
        "dependencies:
  bench_client:
    isolation: global
    trip: {{consecutive_failures: {n}}}
    open_duration: {open}
    half_open: {{probe_budget: {probe_budget}, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 2h
"
    )
}

/// A global dependency on the failure-rate policy.
pub fn rate_yaml(rate: f64, min_calls: u32, window: &str) -> String {
    format!(
        "dependencies:
  bench_client:
    isolation: global
    trip: {{failure_rate: {rate}, min_calls: {min_calls}, window: {window}}}
    open_duration: 1h
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 2h
"
    )
}

/// A tenant-scoped dependency, consecutive policy, with `max_tenants`.
pub fn tenant_yaml(max_tenants: u32) -> String {
    format!(
        "dependencies:
  bench_client:
    isolation: tenant
    trip: {{consecutive_failures: 5}}
    open_duration: 1h
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 2h
    max_tenants: {max_tenants}
"
    )
}

/// A bank on the system monotonic clock (what production uses) and its
/// one dependency, `bench_client`.
///
/// # Panics
/// If the YAML does not load: these profiles are fixed, so that is a bug.
pub fn bank(yaml: &str) -> (Bank, Dependency) {
    let profile = Profile::from_yaml(yaml).unwrap_or_else(|e| panic!("bench profile: {e}"));
    let bank = Bank::new(profile);
    let dep = bank
        .dependency("bench_client")
        .unwrap_or_else(|| panic!("bench_client is declared"));
    (bank, dep)
}

/// Writes tenant `i`'s id into `buf` and returns it: `t` and 8 letters
/// `a`..=`p`, one per 4 bits of `i` (distinct for distinct `i`). Fixed
/// width, no allocation, no table in memory, a dozen instructions: the id
/// costs the caller next to nothing, as one taken from a request would.
#[inline]
pub fn tenant_id(i: u32, buf: &mut [u8; 9]) -> &str {
    // Spread the 8 nibbles of `i` into the 8 bytes of a u64 (SWAR).
    let mut x = u64::from(i);
    x = ((x & 0xFFFF_0000) << 16) | (x & 0xFFFF);
    x = ((x & 0x0000_FF00_0000_FF00) << 8) | (x & 0x0000_00FF_0000_00FF);
    x = ((x & 0x00F0_00F0_00F0_00F0) << 4) | (x & 0x000F_000F_000F_000F);
    buf[0] = b't';
    buf[1..].copy_from_slice(&(x + 0x6161_6161_6161_6161).to_le_bytes());
    // SAFETY: `buf[0]` is `t` and every other byte is `a` + a nibble
    // (0x61..=0x70): all ASCII, hence valid UTF-8. (Checked validation
    // would cost more than everything else here.)
    unsafe { std::str::from_utf8_unchecked(buf) }
}

/// Tenant `i`'s id in UUID shape (36 bytes): a fixed 27-byte prefix, then
/// [`tenant_id`]'s 9 bytes. Too long for a partition to keep (15 bytes),
/// so a partition keeps its keyed fingerprint (SipHash-1-3), computed on
/// every lookup: the bench's long-id row.
#[inline]
pub fn long_tenant_id(i: u32, buf: &mut [u8; 36]) -> &str {
    let mut short = [0u8; 9];
    buf[..27].copy_from_slice(b"5f0c2a9e-7d41-4c3b-9e2f-000");
    buf[27..].copy_from_slice(tenant_id(i, &mut short).as_bytes());
    // SAFETY: an ASCII prefix and `tenant_id`'s ASCII bytes: valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(buf) }
}

/// Calls between writing an id into an [`IdRing`] and using it.
pub const RING: usize = 16;

/// Tenant ids written [`RING`] calls before they are used, as a service's
/// ids come from requests parsed well before the call.
///
/// An id written into one buffer right before each call would make every
/// call wait for that write to reach the cache: the table's lookup reads
/// the id as whole words, a word spans the buffer's byte store and its
/// 8-byte store, and such a load cannot take its bytes from the pending
/// stores: it waits until they commit, which is after every earlier
/// instruction retires. Each call would then begin only once the last one
/// had finished, misses and all.
#[derive(Debug)]
pub struct IdRing {
    short: [[u8; 9]; RING],
    long: [[u8; 36]; RING],
    long_ids: bool,
}

impl IdRing {
    /// An empty ring of [`tenant_id`]s, or [`long_tenant_id`]s if `long_ids`.
    pub fn new(long_ids: bool) -> Self {
        Self {
            short: [[b'-'; 9]; RING],
            long: [[b'-'; 36]; RING],
            long_ids,
        }
    }

    /// Writes tenant `i`'s id into the ring's `slot` (taken mod [`RING`]).
    #[inline]
    pub fn put(&mut self, slot: usize, i: u32) {
        let slot = slot % RING;
        if self.long_ids {
            long_tenant_id(i, &mut self.long[slot]);
        } else {
            tenant_id(i, &mut self.short[slot]);
        }
    }

    /// The id in `slot` (taken mod [`RING`]).
    #[inline]
    pub fn get(&self, slot: usize) -> &str {
        let slot = slot % RING;
        let b: &[u8] = if self.long_ids {
            &self.long[slot]
        } else {
            &self.short[slot]
        };
        // SAFETY: every slot holds ASCII: `-` from `new`, or an id from
        // `tenant_id` / `long_tenant_id` (ASCII, see there).
        unsafe { std::str::from_utf8_unchecked(b) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tenant_ids_are_distinct_ascii() {
        let mut seen = std::collections::HashSet::new();
        let mut buf = [0u8; 9];
        for i in (0..2_000_000u32).chain([u32::MAX, u32::MAX - 1]) {
            let id = super::tenant_id(i, &mut buf);
            assert_eq!(id.len(), 9);
            assert!(seen.insert(id.to_string()), "duplicate id for {i}");
        }
        let mut long = [0u8; 36];
        let a = super::long_tenant_id(7, &mut long).to_string();
        assert_eq!(a.len(), 36);
        assert_ne!(a, super::long_tenant_id(8, &mut long));
    }

    #[test]
    fn an_id_ring_gives_back_the_ids_put_in_it() {
        for long_ids in [false, true] {
            let mut ring = super::IdRing::new(long_ids);
            let (mut buf, mut long) = ([0u8; 9], [0u8; 36]);
            for i in 0..40u32 {
                ring.put(i as usize, i * 7);
                let want = if long_ids {
                    super::long_tenant_id(i * 7, &mut long)
                } else {
                    super::tenant_id(i * 7, &mut buf)
                };
                assert_eq!(ring.get(i as usize), want);
                if i >= 1 {
                    assert_ne!(ring.get(i as usize - 1), want);
                }
            }
        }
    }
}
