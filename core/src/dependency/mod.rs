//! One dependency of a bank: its partitions, the routing of a tenant to
//! its partition, and the counters each count goes to.

use crate::call::Classifier;
use crate::clock::{Clock, Instant, MonotonicClock};
use crate::dependency::permit::*;
use crate::events::EventBus;
use crate::fallback::{Fallback, StaleCache, STALE_CACHE_CAPACITY};
use crate::metrics::{DepCounts, Stats};
use crate::outcome::*;
use crate::partition::{Owner, Partition, GLOBAL, NO_OWNER, OVERFLOW};
use crate::profile::{ConfigError, DependencyConfig, Isolation, Mode, TripPolicy};
use crate::sync::{epoch, AtomicPtr, AtomicU32, AtomicU64, CachePadded, Mutex, Ordering, StdArc};
use crate::table::{Resolved, Table};
use crate::window::Window;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

mod admit;
mod held;
mod observe;
mod operate;
pub(crate) mod permit;
mod record;
mod reload;
mod sweep;

pub use self::held::HeldPermit;
pub use self::operate::Inspection;
pub use self::permit::{Decision, Permit, RawPermit};
pub(crate) use self::reload::{fast, Tuning};
pub use self::sweep::Stuck;
pub(crate) use self::sweep::Sweeper;

/// A dependency's partitions as the cold paths walk them: the global one,
/// or a tenant table and its overflow partition.
pub(crate) enum Parts<'a> {
    Global(&'a Partition),
    Tenant(&'a Table, &'a Partition),
}

pub(crate) struct DepInner {
    /// The fast-path bits of the current [`Tuning`] (see [`fast`]), and
    /// [`fast::RETIRED`]: one relaxed load decides which path an admission
    /// or a record takes. Set by a reload after the tuning it describes.
    pub(crate) fast: AtomicU32,
    /// The current [`Tuning`]: one of `tunings`, never freed before the
    /// dependency (a [`Rejection`] borrows its fallback), so reading it
    /// needs no pin. Read once per decision that needs more than `fast`.
    tuning: AtomicPtr<Tuning>,
    /// Every tuning this dependency has had, the current one last: what
    /// keeps `tuning` alive. A reload adds one.
    // Boxed: `tuning` points into each box, which must not move when the
    // vector grows.
    #[allow(clippy::vec_box)]
    tunings: Mutex<Vec<Box<Tuning>>>,
    pub(crate) id: u32,
    /// The name and isolation: what a reload keeps a dependency by (C20).
    pub(crate) name: String,
    pub(crate) isolation: Isolation,
    pub(crate) clock: StdArc<dyn Clock>,
    /// The clock again when it is the system one: its coarse reading is
    /// then one inlined load, not a dynamic call.
    pub(crate) mono: Option<MonotonicClock>,
    /// Slot 0: the global partition, or a tenant-scoped dependency's
    /// overflow. Inline and found without a branch on the isolation, so
    /// the healthy global path is loads from one block.
    pub(crate) shared: CachePadded<Partition>,
    /// Slot 0's counters, for its life (a tenant slot's are its owner's:
    /// see [`Dependency::counters`]). A global partition's count its
    /// refusals in per-thread stripes: every caller meets the same open
    /// breaker.
    pub(crate) shared_stats: Stats,
    /// The tenant partitions (slots 1…), for tenant isolation.
    pub(crate) table: Option<Table>,
    /// Made with the dependency when its fallback is `stale`, or by the
    /// first reload that makes it so; kept from then on, also while a
    /// later profile declares another fallback (C20 keeps it across
    /// reloads).
    pub(crate) stale: std::sync::OnceLock<StaleCache>,
    pub(crate) events: StdArc<EventBus>,
    pub(crate) sweeper: StdArc<Sweeper>,
    /// Bank-clock time (ns) from which the sweep has something to do for
    /// this dependency (an open period ending, an episode reaching its
    /// recovery bound); `u64::MAX`: nothing.
    pub(crate) sweep_due: AtomicU64,
    /// The default error classifier of the wrapped calls (C17), set once.
    pub(crate) classify: OnceLock<Box<Classifier>>,
    /// Successes and call durations, for the per-dependency series (C14).
    pub(crate) counts: DepCounts,
}

/// One dependency of a bank: resolve once with
/// [`Bank::dependency`](crate::Bank::dependency), clone freely (an `Arc`),
/// call on the hot path.
#[derive(Clone)]
pub struct Dependency {
    pub(crate) inner: StdArc<DepInner>,
}

impl fmt::Debug for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dependency")
            .field("name", &self.inner.name)
            .field("isolation", &self.inner.isolation)
            .finish()
    }
}

/// Where one admission goes.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) slot: u32,
    pub(crate) part: &'a Partition,
    pub(crate) owner: Owner,
    pub(crate) overflow: bool,
    /// See `Resolved::made_closed`.
    pub(crate) made_closed: bool,
}

impl<'a> Target<'a> {
    /// The dependency's shared overflow partition (C9).
    fn overflow(shared: &'a Partition) -> Self {
        Target {
            slot: 0,
            part: shared,
            owner: NO_OWNER,
            overflow: true,
            made_closed: false,
        }
    }
}

/// A pin for reading or bumping the counters of the partition at `slot`
/// (see [`Dependency::counters`]): none for slot 0, whose counters are
/// never replaced.
#[inline]
pub(crate) fn pin_for(slot: u32) -> Option<epoch::Guard> {
    (slot != 0).then(epoch::pin)
}

impl Dependency {
    /// The dependency of `config`; a tenant table the allocator refuses is
    /// a [`ConfigError`] naming it (C9).
    pub(crate) fn try_new(
        id: u32,
        config: DependencyConfig,
        clock: StdArc<dyn Clock>,
        events: StdArc<EventBus>,
        sweeper: StdArc<Sweeper>,
    ) -> Result<Self, ConfigError> {
        let window = match config.trip {
            TripPolicy::FailureRate { window, .. } => Some(window),
            TripPolicy::ConsecutiveFailures(_) => None,
        };
        // The global or overflow partition's window: shared by every caller
        // (an overflow one by every tenant that finds no room) and never
        // recycled, so it keeps per-thread copies.
        let shared_window = window.map(|w| Window::new(w, crate::window::window_stripes()));
        let (shared, shared_stats, table) = match config.isolation {
            Isolation::Global => (Partition::standalone(shared_window), Stats::striped(), None),
            Isolation::Tenant => (
                Partition::standalone(shared_window),
                Stats::default(),
                Some(Table::try_new(config.max_tenants, window).map_err(|e| {
                    ConfigError::one(format!(
                        "dependency `{}`: cannot allocate the partition table of its `max_tenants: {}` ({e}); lower `max_tenants` or give the process more memory",
                        config.name, config.max_tenants
                    ))
                })?),
            ),
        };
        let stale = match config.fallback {
            Fallback::Stale { max_staleness } => {
                Some(StaleCache::new(STALE_CACHE_CAPACITY, max_staleness))
            }
            _ => None,
        };
        if let Some(t) = &table {
            t.set_probe_timeout(config.probe_timeout);
        }
        let coarse_window = shared.window().is_some_and(|w| w.coarse_ok());
        let tuning = Box::new(Tuning::of(config, table.is_some(), coarse_window));
        let fast = tuning.fast;
        Ok(Self {
            inner: StdArc::new(DepInner {
                fast: AtomicU32::new(fast),
                tuning: AtomicPtr::new(std::ptr::from_ref(&*tuning).cast_mut()),
                id,
                name: tuning.config.name.clone(),
                isolation: tuning.config.isolation,
                tunings: Mutex::new(vec![tuning]),
                mono: clock.as_monotonic().copied(),
                clock,
                shared: CachePadded::new(shared),
                shared_stats,
                table,
                stale: stale.map_or_else(std::sync::OnceLock::new, Into::into),
                events,
                sweeper,
                sweep_due: AtomicU64::new(u64::MAX),
                classify: OnceLock::new(),
                counts: DepCounts::new(),
            }),
        })
    }

    /// The dependency's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its index in the bank (stable; what the C API calls its id).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// Whether each tenant has its own breaker.
    pub fn is_tenant_scoped(&self) -> bool {
        self.inner.isolation == Isolation::Tenant
    }

    /// The declared fallback, as the profile in force now declares it
    /// (a reload may change it: C20).
    pub fn fallback(&self) -> &Fallback {
        &self.inner.tuning().config.fallback
    }

    /// The validated configuration in force now (a reload may replace it:
    /// C20).
    pub fn config(&self) -> &DependencyConfig {
        &self.inner.tuning().config
    }

    /// The transition knobs in force, for the cold paths (operator
    /// actions, inspection).
    pub(crate) fn policy(&self) -> &crate::state::machine::Policy {
        &self.inner.tuning().policy
    }

    /// Calls at least this slow count as failures.
    pub fn slow_call(&self) -> Option<Duration> {
        self.inner.tuning().config.slow_call
    }

    /// Now, on the bank's clock.
    pub fn now(&self) -> Instant {
        self.inner.clock.now()
    }

    /// The bank clock's coarse reading ([`Clock::now_coarse`]).
    #[inline(always)]
    pub(crate) fn now_coarse(&self) -> Instant {
        match &self.inner.mono {
            Some(m) => m.recent(),
            None => self.inner.clock.now_coarse(),
        }
    }

    #[inline]
    pub(crate) fn parts(&self) -> Parts<'_> {
        match &self.inner.table {
            None => Parts::Global(&self.inner.shared),
            Some(t) => Parts::Tenant(t, &self.inner.shared),
        }
    }

    /// The tenant as this dependency takes it: none for a global one
    /// (which ignores it, whatever it is), else a non-empty id of at most
    /// [`MAX_TENANT_LEN`] bytes (C9). The one place the rule is applied.
    /// A dependency a reload removed refuses here, before anything else
    /// ([`AdmitError::UnknownDependency`], C20): admission's general path,
    /// state reads and operator actions all start here.
    pub(crate) fn tenant<'t>(
        &self,
        tenant: Option<&'t str>,
    ) -> Result<Option<&'t str>, AdmitError> {
        if self.is_retired() {
            return Err(AdmitError::UnknownDependency);
        }
        self.tenant_rule(tenant)
    }

    /// [`Dependency::tenant`] without the retirement check: for serving a
    /// fallback decided before a reload removed the dependency.
    pub(crate) fn tenant_rule<'t>(
        &self,
        tenant: Option<&'t str>,
    ) -> Result<Option<&'t str>, AdmitError> {
        match (self.parts(), tenant) {
            (Parts::Global(_), _) => Ok(None),
            (Parts::Tenant(..), Some(t)) if !t.is_empty() => match TenantProblem::of(t) {
                None => Ok(Some(t)),
                Some(problem) => Err(AdmitError::InvalidTenant { problem }),
            },
            (Parts::Tenant(..), _) => Err(AdmitError::TenantRequired),
        }
    }

    /// Resolves (creating if needed) the partition for an admission.
    #[inline]
    pub(crate) fn target(&self, tenant: Option<&str>) -> Target<'_> {
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => Target {
                slot: 0,
                part: p,
                owner: NO_OWNER,
                overflow: false,
                made_closed: false,
            },
            (Parts::Tenant(t, shared), Some(name)) => {
                match t.get_or_insert_at(name, &|| self.now_coarse().as_nanos()) {
                    Some(Resolved {
                        slot,
                        part,
                        owner,
                        made_closed,
                    }) => {
                        part.touch(|| t.tick());
                        Target {
                            slot,
                            part,
                            owner,
                            overflow: false,
                            made_closed,
                        }
                    }
                    None => Target::overflow(shared),
                }
            }
            (Parts::Tenant(_, shared), None) => Target::overflow(shared),
        }
    }

    /// Resolves again after the tenant's slot was recycled under us. With
    /// a full table two new tenants can evict each other's fresh, idle
    /// partitions indefinitely (loom found it); after two losses the call
    /// goes to the overflow partition, so admission always finishes.
    pub(crate) fn retarget(&self, tenant: Option<&str>, lost: &mut u32) -> Target<'_> {
        *lost += 1;
        match self.parts() {
            Parts::Tenant(_, shared) if *lost > 2 => Target::overflow(shared),
            _ => self.target(tenant),
        }
    }

    #[inline]
    pub(crate) fn partition_by_slot(&self, slot: u32) -> Option<&Partition> {
        if slot == 0 {
            return Some(&self.inner.shared);
        }
        self.inner.table.as_ref()?.get(slot)
    }

    /// The counters a count for the owner of the partition at `slot` as
    /// of `generation` goes to (a generation the caller saw that owner's
    /// word at, or its permit's): a standalone partition's own at slot 0,
    /// else that owner's, or none once the slot holds a later owner's (a
    /// count of an evicted partition reaches no one: C9, C13). `pin` is
    /// [`pin_for`]`(slot)`.
    pub(crate) fn counters<'a>(
        &'a self,
        slot: u32,
        part: &'a Partition,
        generation: u64,
        pin: &'a Option<epoch::Guard>,
    ) -> Option<&'a Stats> {
        if slot == 0 {
            return Some(&self.inner.shared_stats);
        }
        let (since, guard) = self.tenure_pinned(slot, pin)?;
        if since > generation {
            return None;
        }
        part.owner_stats(since, guard)
    }

    /// The counters of the partition at `slot` as its current owner has
    /// them, if it made any (for reading). `pin` as for
    /// [`Dependency::counters`].
    pub(crate) fn current_counters<'a>(
        &'a self,
        slot: u32,
        part: &'a Partition,
        pin: &'a Option<epoch::Guard>,
    ) -> Option<&'a Stats> {
        if slot == 0 {
            return Some(&self.inner.shared_stats);
        }
        let (since, guard) = self.tenure_pinned(slot, pin)?;
        part.owner_stats_if_any(since, guard)
    }

    /// The current tenure of tenant slot `slot`, with the guard of `pin`
    /// to read its owner's counters under.
    pub(crate) fn tenure_pinned<'a>(
        &'a self,
        slot: u32,
        pin: &'a Option<epoch::Guard>,
    ) -> Option<(u64, &'a epoch::Guard)> {
        Some((self.inner.table.as_ref()?.tenure(slot), pin.as_ref()?))
    }

    /// The name of the partition at `slot` as of `generation`: none once
    /// the slot's tenure began after it (the owner then is gone).
    pub(crate) fn partition_name_at(
        &self,
        slot: u32,
        part: &Partition,
        generation: u64,
    ) -> Option<String> {
        match self.parts() {
            Parts::Global(_) => Some(GLOBAL.to_string()),
            Parts::Tenant(..) if slot == 0 => Some(OVERFLOW.to_string()),
            Parts::Tenant(t, _) => t.owner_name(slot, part, generation).map(|k| k.to_string()),
        }
    }
}
