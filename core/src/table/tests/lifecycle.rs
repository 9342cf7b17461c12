use super::*;

#[test]
fn c9_tenant_windows_count_in_the_shared_copy_only() {
    let t = Table::new(8, Some(Duration::from_secs(10)));
    let r = t.get_or_insert("a").expect("room");
    assert!(
        r.part.window().is_none(),
        "a tenant's window is per episode"
    );
    let (owned, stripes, episode) = r
        .part
        .with_episode_window(|w| (w.owned, w.stripes.len(), w.episode))
        .expect("a failure-rate table has windows");
    assert_eq!((owned, stripes), (0, 1));
    assert_eq!(
        episode,
        r.part.cell.load().generation(),
        "the tenant's first episode"
    );
}

#[test]
fn c9_every_slot_a_tenant_takes_has_its_window_and_no_other_does() {
    let n = 300;
    let t = Table::new(n, Some(Duration::from_secs(10)));
    let ids: Vec<String> = (0..n).map(|i| format!("tenant-{i}")).collect();
    let slots: Vec<u32> = ids
        .iter()
        .map(|id| t.get_or_insert(id).expect("room").slot)
        .collect();
    for (id, &slot) in ids.iter().zip(&slots) {
        let r = t.lookup(id).expect("inserted");
        assert_eq!(r.slot, slot, "{id}");
        let owned = r.part.with_episode_window(|w| w.owned);
        assert_eq!(owned, Some(0), "{id}");
    }
    let untaken = (1..=2 * n)
        .filter(|s| !slots.contains(s))
        .filter(|&s| t.get(s).expect("in the arena").cell.side_if_any().is_none())
        .count();
    assert_eq!(untaken, n as usize, "a free slot has no side part");
    assert!(t.get(2 * n + 1).is_none(), "past the arena");
    assert!(t.get(0).is_none(), "the overflow is not the table's");
}

#[test]
fn c9_c11_a_slot_is_owned_by_its_tenant_through_its_transitions_and_no_longer() {
    use crate::state::machine;
    let t = Table::new(1, None);
    let a = t.get_or_insert("a").expect("room");
    assert!(!a.owner.is_none() && NO_OWNER.is_none());
    let part = a.part;
    assert!(part.owned_by(part.cell.load(), a.owner));
    // A transition moves the generation on: still a's, by its key.
    part.cell
        .operate(machine::force_open, |_| true)
        .done()
        .expect("forced open");
    let forced = part.cell.load();
    assert_ne!(forced.generation(), a.owner.generation);
    assert!(
        part.owned_by(forced, a.owner),
        "a's after its own transition"
    );
    part.cell
        .operate(machine::reset, |_| true)
        .done()
        .expect("reset");
    // b takes a's room: the slot a held is a's no longer.
    let b = t.get_or_insert("b").expect("a is idle and evictable");
    assert!(t.lookup("a").is_none(), "a was evicted");
    assert!(
        !part.owned_by(part.cell.load(), a.owner),
        "a's after its eviction"
    );
    assert!(b.part.owned_by(b.part.cell.load(), b.owner));
    assert!(
        part.owned_by(part.cell.load(), NO_OWNER),
        "anyone's for no owner"
    );
}

/// A word read, then the slot changes hands and comes back to the tenant
/// before its key is read: the key is the tenant's again, but the word was
/// another tenure's. Taken for the tenant's, a refusal decided on it (no
/// CAS checks a refusal) refused a tenant that never failed with another
/// tenant's `open` (found by the soak, about once in 50 million calls).
#[test]
fn c5_c9_a_word_of_another_tenure_is_never_taken_for_the_tenant_whose_key_came_back() {
    use crate::state::machine;
    let t = Table::new(1, None);
    let a = t.get_or_insert("a").expect("room");
    let (slot, part) = (a.slot, a.part);
    // The slot's hand-overs as eviction and insert make them: vacant,
    // then the newcomer's pending word, then its first.
    let hand_to = |name: &str| {
        part.cell.hand_over(Phase::Vacant);
        let key = t.key_words(name);
        let (_, pending) = t.hand_to(slot, part, key);
        t.complete(part, pending, key)
    };
    // b takes a's slot and is isolated: the word a reader of a's slot
    // loads.
    hand_to("b");
    part.cell
        .operate(machine::force_open, |_| true)
        .done()
        .expect("b isolated");
    let b_open = part.cell.load();
    assert_eq!(b_open.phase(), Phase::ForcedOpen);
    // Then b is reset and evicted, and a comes back to the same slot.
    part.cell
        .operate(machine::reset, |_| true)
        .done()
        .expect("reset");
    let back = hand_to("a");
    assert!(part.key_is(a.owner.key), "a's key again");
    assert!(
        !part.owned_by(b_open, a.owner),
        "b's word is not a's, though a's key is back"
    );
    assert!(
        !part.keyed(b_open, a.owner.key),
        "and the lookups' check agrees"
    );
    assert!(part.owned_by(back, a.owner), "a's own word is");
    assert!(part.keyed(back, a.owner.key));
}

/// An eviction scan that meets only a tenant still being inserted finds
/// nothing to evict, and remembers it; the insert then completes, closed
/// and idle: evictable. The memory must not outlive that, or every
/// newcomer after it goes to the shared overflow partition while the
/// table holds an idle partition (found by a stress test where a
/// failing tenant never got a slot back).
#[test]
fn c9_a_tenant_whose_insert_completes_is_evictable_for_the_next_newcomer() {
    let t = Table::new(1, None);
    let a = t.get_or_insert("a").expect("room");
    // a's insert, caught before its completion (a racing inserter's or
    // lookup's view of it).
    let pending = a.part.cell.hand_over(Phase::Pending);
    assert!(
        t.get_or_insert("b").is_none(),
        "nothing evictable while a is pending: b to the overflow"
    );
    let done = t.complete(a.part, pending, a.owner.key);
    assert_eq!(done.phase(), Phase::Closed);
    let b = t
        .get_or_insert("b")
        .expect("a is closed and idle: b takes its room");
    assert!(t.lookup("a").is_none(), "a was evicted");
    assert!(t.lookup("b").is_some_and(|r| r.slot == b.slot));
}

#[test]
fn c9_c13_counters_are_made_for_each_owner_and_never_given_back_to_an_earlier_one() {
    let part = Partition::standalone(None);
    let guard = epoch::pin();
    let block = |since| part.owner_stats(since, &guard).map(|s| s as *const Stats);
    let first = block(5).expect("made for the owner of tenure 5");
    assert_eq!(block(5), Some(first), "the same block again");
    assert_eq!(block(3), None, "an earlier owner's count reaches no one");
    assert_eq!(block(5), Some(first), "and takes nothing from the owner");
    let next = block(7).expect("a later owner's own block");
    assert_ne!(next, first);
    assert_eq!(block(5), None, "the owner before it is gone");
    // SAFETY: made by `owner_stats` above; alive while `guard` is held.
    assert_eq!(unsafe { &*next }.since, 7);
}

/// Counts one failure in a partition's word: closed, not idle.
fn mark_used(part: &Partition) {
    part.cell.update(|w| {
        let n = w.with_count(1);
        Step::Install(n, n)
    });
}

#[test]
fn c9_an_insert_is_admitted_on_the_closed_word_it_made_and_only_then() {
    let t = Table::new(4, None);
    let a = t.get_or_insert("a").expect("room");
    assert!(
        a.made_closed,
        "a new tenant's first call rides its fresh word"
    );
    let w = a.part.cell.load();
    assert_eq!(
        (w.phase(), w.generation()),
        (Phase::Closed, a.owner.generation)
    );
    assert_eq!(
        t.owner_name(a.slot, a.part, a.owner.generation).as_deref(),
        Some("a"),
        "the tenure began with that word"
    );
    let again = t.get_or_insert("a").expect("found");
    assert_eq!(again.slot, a.slot);
    assert!(!again.made_closed, "found, not made");
    t.forced_all.store(true, Ordering::SeqCst);
    let b = t.get_or_insert("b").expect("room");
    assert_eq!(b.part.cell.load().phase(), Phase::ForcedOpen);
    assert!(!b.made_closed, "made forced open");
}

#[test]
fn c11_an_insert_settles_on_the_operator_action_it_raced_unless_its_tenant_moved_on() {
    let hint = |t: &Table| t.evictable_epoch.load(Ordering::Relaxed);
    // force_open(None) stored its flag after the insert read it.
    let t = Table::new(4, None);
    let a = t.get_or_insert("a").expect("room");
    let (part, key, g) = (a.part, a.owner.key, a.owner.generation);
    let first = part.cell.load();
    t.forced_all.store(true, Ordering::SeqCst);
    let before = hint(&t);
    let forced = t.settle_forced(part, first, key, g);
    assert_eq!(forced.phase(), Phase::ForcedOpen);
    assert_eq!(part.cell.load(), forced);
    assert_eq!(hint(&t), before, "forced open: nothing became evictable");
    // reset(None) cleared it after an insert read it set: closed, and
    // evictable again.
    let t = Table::new(4, None);
    t.forced_all.store(true, Ordering::SeqCst);
    let b = t.get_or_insert("b").expect("room");
    let (part, key, g) = (b.part, b.owner.key, b.owner.generation);
    let first = part.cell.load();
    assert_eq!(first.phase(), Phase::ForcedOpen);
    t.forced_all.store(false, Ordering::SeqCst);
    let before = hint(&t);
    let closed = t.settle_forced(part, first, key, g);
    assert_eq!(closed.phase(), Phase::Closed);
    assert!(hint(&t) > before, "a settled close is evictable");
    // A word of a later episode (here a trip) already decided for it,
    // whether the completion found the first word or the later one.
    let tripped = part.cell.update(|w| {
        let n = w.transition(Phase::Open);
        Step::Install(n, n)
    });
    assert_eq!(t.settle_forced(part, first, key, g), tripped);
    assert_eq!(t.settle_forced(part, tripped, key, g), tripped);
    assert_eq!(part.cell.load(), tripped, "left as it is");
}

#[test]
fn c11_a_tenant_forced_open_while_its_insert_settles_stays_forced() {
    // The steps of `insert`, with the operator between the publish and
    // the inserter's completion: its lookup completes the tenant and
    // `force_open(a)` forces that first word.
    use crate::state::machine;
    let t = Table::new(4, None);
    let key = t.key_words("a");
    let hash = t.hash_key(key);
    let slot = t.alloc_slot(hash, &|| 0).expect("room");
    let part = t.get(slot).expect("a tenant slot");
    let (generation, pending) = t.hand_to(slot, part, key);
    assert!(t.publish(Entry::new(hash, "a", pack_key("a"), slot), key));
    let r = t.lookup("a").expect("published, completed by the lookup");
    assert_eq!(r.owner.generation, generation);
    part.cell
        .operate(machine::force_open, |w| part.owned_by(w, r.owner))
        .done()
        .expect("forced");
    let fresh = t.complete(part, pending, key);
    let settled = t.settle_forced(part, fresh, key, generation);
    assert_eq!(
        settled.phase(),
        Phase::ForcedOpen,
        "the operator's force kept"
    );
    assert_eq!(part.cell.load().phase(), Phase::ForcedOpen);
}

#[test]
fn c9_a_lookup_through_the_shards_leaves_a_completed_tenant_as_it_is() {
    let t = Table::new(4, None);
    let a = t.get_or_insert("a").expect("room");
    mark_used(a.part);
    let before = a.part.cell.load();
    let key = t.key_words("a");
    let r = t
        .lookup_sharded("a", t.hash_key(key), key)
        .expect("published");
    assert_eq!(r.slot, a.slot);
    assert_eq!(a.part.cell.load(), before, "found, not made afresh");
}

/// The slot the shard of `hash` publishes for `tenant`, if any.
fn published(t: &Table, hash: u64, tenant: &str) -> Option<u32> {
    let guard = epoch::pin();
    let shard = t.shard(hash).load(Ordering::Acquire, &guard);
    // SAFETY: shards are never null while the table lives; the guard
    // keeps this one alive.
    let shard = unsafe { shard.deref() };
    shard
        .map
        .find(hash, |e| e.hash() == hash && e.is(tenant, pack_key(tenant)))
        .map(Entry::slot)
}

#[test]
fn c9_tenants_whose_hashes_collide_keep_their_own_entries() {
    // Two 64-bit hashes meet by chance about once in 2^32 pairs of a
    // million tenants; the entries must still name each its own.
    let long = |c: char| format!("{c}-{}", "x".repeat(40));
    for (a, b) in [("a".to_string(), "b".to_string()), (long('a'), long('b'))] {
        let t = Table::new(8, None);
        let h = 0x0123_4567_89ab_cdef;
        let sa = t.get_or_insert(&a).expect("room").slot;
        let sb = t.get_or_insert(&b).expect("room").slot;
        for (id, slot) in [(&a, sa), (&b, sb)] {
            let entry = Entry::new(h, id, pack_key(id), slot);
            assert!(
                t.publish(entry, t.key_words(id)),
                "{id} published at {h:#x}"
            );
        }
        for (id, slot) in [(&a, sa), (&b, sb)] {
            assert_eq!(published(&t, h, id), Some(slot), "{id}'s entry");
            let key = t.key_words(id);
            let found = t.lookup_sharded(id, h, key).map(|r| r.slot);
            assert_eq!(found, Some(slot), "{id} looked up at {h:#x}");
        }
    }
}

#[test]
fn c9_a_long_id_is_named_by_its_own_entry_among_colliding_ones() {
    // A long id's name is read from the entry of its hash and slot: an
    // entry of another id with the same hash, met first, is not it.
    let (a, b) = (
        format!("a-{}", "x".repeat(40)),
        format!("b-{}", "x".repeat(40)),
    );
    let t = Table::new(8, None);
    let ra = t.get_or_insert(&a).expect("room");
    let rb = t.get_or_insert(&b).expect("room");
    let ha = t.hash(&a);
    // b's entry forged at a's hash, then a's published again: a's
    // comes after b's in the shard.
    assert!(t.publish(Entry::new(ha, &b, None, rb.slot), t.key_words(&b)));
    assert!(t.publish(Entry::new(ha, &a, None, ra.slot), t.key_words(&a)));
    assert_eq!(t.key_of(ra.slot, ra.part).as_deref(), Some(a.as_str()));
    assert_eq!(t.key_of(rb.slot, rb.part).as_deref(), Some(b.as_str()));
}

#[test]
fn c9_a_publish_replaces_stale_entries_and_yields_only_to_a_live_inserter() {
    let t = Table::new(8, None);
    let a = t.get_or_insert("a").expect("room");
    let key = t.key_words("a");
    let hash = t.hash_key(key);
    let entry = |slot| Entry::new(hash, "a", pack_key("a"), slot);
    // An entry naming the very slot the publisher holds is stale.
    assert!(t.publish(entry(a.slot), key), "its own slot again");
    // a's live partition wins over another slot.
    let s = t.claim_any_free().expect("a free slot");
    assert!(!t.publish(entry(s), key), "a's live partition stays");
    assert_eq!(published(&t, hash, "a"), Some(a.slot));
    // An entry of z's naming a slot another tenant (c) took since is
    // stale: z's inserter replaces it.
    let c = t.get_or_insert("c").expect("room");
    let z = t.key_words("z");
    let z_hash = t.hash("z");
    let z_entry = |slot| Entry::new(z_hash, "z", pack_key("z"), slot);
    assert!(t.publish(z_entry(c.slot), z));
    assert!(t.publish(z_entry(s), z), "over c's slot");
    assert_eq!(published(&t, z_hash, "z"), Some(s));
}

#[test]
fn c9_unpublishing_an_entry_no_longer_there_leaves_the_tenants_live_one() {
    let t = Table::new(8, None);
    let a = t.get_or_insert("a").expect("room");
    let key = t.key_words("a");
    let hash = t.hash_key(key);
    let elsewhere = if a.slot == 1 { 2 } else { 1 };
    t.unpublish(&Entry::new(hash, "a", pack_key("a"), elsewhere));
    assert_eq!(published(&t, hash, "a"), Some(a.slot));
    assert_eq!(t.lookup("a").map(|r| r.slot), Some(a.slot));
}

#[test]
fn c9_the_overflows_slot_names_no_tenant() {
    let t = Table::new(4, None);
    let a = t.get_or_insert("a").expect("room");
    assert_eq!(t.key_of(a.slot, a.part).as_deref(), Some("a"));
    assert_eq!(t.key_of(0, a.part), None, "slot 0 is the overflow's");
}

#[test]
fn c9_a_spare_slot_is_searched_from_a_rotating_start_over_every_slot() {
    let t = Table::new(4, None);
    let n = t.arena.slots as u32;
    assert!(t.claim(1));
    let first = t.claim_any_free().expect("seven slots free");
    assert_ne!(first, 1);
    // Every slot but one held: each search still finds it.
    for free in 2..=n {
        let t = Table::new(4, None);
        for slot in (1..=n).filter(|&s| s != free) {
            assert!(t.claim(slot));
        }
        assert_eq!(t.claim_any_free(), Some(free));
    }
}

/// The index of the shard that holds `id`'s entry.
fn shard_of(t: &Table, id: &str) -> usize {
    let shard = t.shard(t.hash(id));
    t.shards
        .iter()
        .position(|s| std::ptr::eq(s, shard))
        .expect("one of the table's shards")
}

#[test]
fn c9_a_scan_prefers_an_idle_partition_of_its_first_shards_then_takes_a_used_one() {
    // The first scan starts at shard 0: an idle partition among the
    // first EVICT_SCAN_FIRST shards goes first (C9's order); past
    // them the scan settles for the least recently used, so one
    // admission's scan stays bounded.
    let last = EVICT_SCAN_FIRST - 1;
    for (at, idle_goes) in [(1, true), (last, true), (last + 1, false), (15, false)] {
        let t = Table::new(512, None);
        assert_eq!(t.shards.len(), 16);
        let ids: Vec<String> = (0..512).map(|i| format!("t{i}")).collect();
        let idle = ids
            .iter()
            .find(|id| shard_of(&t, id) == at)
            .expect("a tenant in every shard")
            .clone();
        for id in &ids {
            let r = t.get_or_insert(id).expect("room");
            if *id != idle {
                mark_used(r.part);
            }
        }
        t.get_or_insert("newcomer").expect("a victim");
        let gone: Vec<&String> = ids.iter().filter(|id| t.lookup(id).is_none()).collect();
        assert_eq!(gone.len(), 1, "{gone:?}");
        assert_eq!(
            *gone[0] == idle,
            idle_goes,
            "idle {idle} in shard {at}; evicted {} of shard {}",
            gone[0],
            shard_of(&t, gone[0])
        );
    }
}
