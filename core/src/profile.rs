//! The YAML profile: read into a tree that keeps each value's position
//! ([`yaml`]), then validated into [`DependencyConfig`]s. Every problem is
//! listed, each naming the dependency and the field, with its line and
//! column, in the profile's words.

use crate::fallback::Fallback;
use crate::state::word::{MAX_COUNT, MAX_PROBES};
use crate::table::Table;
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

mod advice;
#[cfg(test)]
mod fields;
mod slo;
mod yaml;

pub use advice::{Advice, AdviceKind};
pub use slo::{Recovery, Slo};

use yaml::{At, Kind, Node, Position, Shown, Value};

/// Default bound on tenant partitions per tenant-scoped dependency (C9).
pub const DEFAULT_MAX_TENANTS: u32 = 100_000;
/// Largest `max_tenants` accepted (C9): a table of this many tenants
/// takes about 67 MB when the bank is built.
pub const MAX_MAX_TENANTS: u32 = 1_000_000;
// A table has two slots a tenant, each named by the tenant index.
const _: () = assert!(2 * (MAX_MAX_TENANTS as u64) < crate::table::MAX_SLOTS);
/// The `memory_limit` of a profile that sets none (C9): 1 GiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;
/// Largest `min_calls` the rolling window can count.
pub const MAX_MIN_CALLS: u32 = (1 << 20) - 1;

/// A profile that could not be loaded: every problem found, each naming
/// the dependency and field it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    problems: Vec<String>,
}

impl ConfigError {
    pub(crate) fn one(msg: impl Into<String>) -> Self {
        Self {
            problems: vec![msg.into()],
        }
    }

    /// An error of every problem in `problems` (not empty).
    pub(crate) fn many(problems: Vec<String>) -> Self {
        Self { problems }
    }

    /// Each problem, one sentence each.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid profile: {}", self.problems.join("; "))
    }
}

impl std::error::Error for ConfigError {}

/// Whether a dependency has one breaker or one per tenant (C1, C9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// One partition, `global`.
    Global,
    /// One partition per tenant id.
    Tenant,
}

/// When a closed breaker trips (C5).
#[derive(Clone, Debug, PartialEq)]
pub enum TripPolicy {
    /// After this many failures in a row.
    ConsecutiveFailures(u32),
    /// When failures / calls ≥ `rate` with at least `min_calls` calls in the
    /// rolling `window`.
    FailureRate {
        /// Threshold in (0, 1].
        rate: f64,
        /// Calls needed in the window before the rate counts.
        min_calls: u32,
        /// Length of the rolling window.
        window: Duration,
    },
}

/// Whether a dependency's trip policy opens its breakers (C22).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The policy trips the breaker open. The default.
    #[default]
    Enforce,
    /// Every call is admitted: when the policy fires, the breaker counts
    /// and announces a `would_trip` and stays closed, its counts restarted
    /// as after a close.
    Observe,
}

/// Backoff of the open period on re-trips from half-open (C6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Factor per re-trip, ≥ 1.
    pub multiplier: f64,
    /// Cap on the open period.
    pub max: Duration,
}

/// One dependency's validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct DependencyConfig {
    /// The client module's name (C2).
    pub name: String,
    /// Global or per tenant.
    pub isolation: Isolation,
    /// Trip policy.
    pub trip: TripPolicy,
    /// Calls at least this slow count as failures.
    pub slow_call: Option<Duration>,
    /// Base open period.
    pub open_duration: Duration,
    /// Optional backoff.
    pub backoff: Option<Backoff>,
    /// Probes in flight at most (C7).
    pub probe_budget: u32,
    /// Probe successes needed to close (C8).
    pub success_threshold: u32,
    /// What callers get when not admitted (C3).
    pub fallback: Fallback,
    /// When a tripped breaker counts as stuck (C15).
    pub recovery_bound: Duration,
    /// How long a probe may stay unrecorded before it gives its slot back
    /// and counts as cancelled (C7); the profile's `probe_timeout`,
    /// `recovery_bound` when it has none.
    pub probe_timeout: Duration,
    /// Bound on tenant partitions (tenant isolation only), at most
    /// [`MAX_MAX_TENANTS`]. The table's slots (64 bytes a tenant, two of
    /// 32), the generation each slot's tenure began at (16 bytes a
    /// tenant) and index (2 bytes a tenant) are allocated when the bank is
    /// made, so the bound costs memory from the start, tenants or not, and
    /// counts against the profile's `memory_limit`; a full table of
    /// healthy tenants costs about 138 bytes a tenant all told.
    pub max_tenants: u32,
    /// What the dependency promises (the profile's `slo`, C21): read by
    /// `check`'s advice and `tune`, never by the breaker.
    pub slo: Option<Slo>,
    /// Whether the trip policy opens the breaker or only reports a
    /// `would_trip` (C22); the profile's `mode`, `enforce` by default.
    pub mode: Mode,
}

/// A validated profile: the dependencies in the order they were declared.
///
/// ```
/// let profile = breakerbank::Profile::from_yaml(r#"
/// dependencies:
///   email_client:
///     isolation: global
///     trip: {failure_rate: 0.5, min_calls: 20, window: 10s}
///     open_duration: 15s
///     half_open: {probe_budget: 1, success_threshold: 1}
///     fallback: {kind: degraded}
///     recovery_bound: 2m
/// "#).unwrap();
/// assert_eq!(profile.dependencies()[0].name, "email_client");
///
/// let err = breakerbank::Profile::from_yaml("dependencies:\n  GET /pay: {}\n").unwrap_err();
/// assert!(err.to_string().contains("GET /pay"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    deps: Vec<DependencyConfig>,
    memory_limit: u64,
    partition_series: PartitionSeries,
}

/// Which partitions the Prometheus exposition lists one by one (the
/// profile's `metrics: {partitions: not_closed | all}`, C14). Every metric
/// has a per-dependency series either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PartitionSeries {
    /// Only partitions not closed (open, half-open, forced open, stuck):
    /// the exposition stays bounded whatever the number of tenants, and a
    /// tenant in an outage is listed by name. The default.
    #[default]
    NotClosed,
    /// Every live partition: one series per metric and tenant, for a
    /// bank with few tenants.
    All,
}

impl Profile {
    /// Parses and validates a YAML profile.
    pub fn from_yaml(text: &str) -> Result<Profile, ConfigError> {
        if text.len() > MAX_PROFILE_BYTES {
            return Err(too_large(text.len() as u64));
        }
        if text.trim().is_empty() {
            return Err(ConfigError::one(EMPTY));
        }
        let root = yaml::parse(text).map_err(ConfigError::one)?;
        Self::validate(&root)
    }

    /// Validates a profile given as data rather than text: a mapping built
    /// in code, or read from another format, with the same checks and the
    /// same messages as [`Profile::from_yaml`] (less the line and column a
    /// value does not have). Durations are strings with a unit (`"30s"`),
    /// as in YAML.
    ///
    /// ```
    /// use breakerbank::serde_yaml_ng::{Mapping, Value};
    /// use breakerbank::Profile;
    ///
    /// let mut email = Mapping::new();
    /// for (field, value) in [
    ///     ("isolation", "global"),
    ///     ("open_duration", "15s"),
    ///     ("recovery_bound", "2m"),
    /// ] {
    ///     email.insert(field.into(), value.into());
    /// }
    /// let mut trip = Mapping::new();
    /// trip.insert("consecutive_failures".into(), 5.into());
    /// email.insert("trip".into(), trip.into());
    /// let mut half_open = Mapping::new();
    /// half_open.insert("probe_budget".into(), 1.into());
    /// half_open.insert("success_threshold".into(), 1.into());
    /// email.insert("half_open".into(), half_open.into());
    /// let mut fallback = Mapping::new();
    /// fallback.insert("kind".into(), "degraded".into());
    /// email.insert("fallback".into(), fallback.into());
    /// let mut deps = Mapping::new();
    /// deps.insert("email_client".into(), email.into());
    /// let mut root = Mapping::new();
    /// root.insert("dependencies".into(), deps.into());
    ///
    /// let profile = Profile::from_value(root.into())?;
    /// assert_eq!(profile.dependencies()[0].name, "email_client");
    /// # Ok::<(), breakerbank::ConfigError>(())
    /// ```
    pub fn from_value(value: serde_yaml_ng::Value) -> Result<Profile, ConfigError> {
        if value.is_null() {
            return Err(ConfigError::one(EMPTY));
        }
        Self::validate(&yaml::from_value(&value))
    }

    /// The checks after reading, the same for text and for data.
    fn validate(root: &Node) -> Result<Profile, ConfigError> {
        let mut problems = Vec::new();
        match validate_top(root, &mut problems) {
            Some(profile) if problems.is_empty() => Ok(profile),
            _ => Err(ConfigError { problems }),
        }
    }

    /// Reads and validates a YAML profile file.
    pub fn load(path: impl AsRef<Path>) -> Result<Profile, ConfigError> {
        let path = path.as_ref();
        let cannot = |e: std::io::Error| {
            ConfigError::one(format!("cannot read profile `{}`: {e}", path.display()))
        };
        // Never more than the cap into memory, whatever the file holds.
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| {
                f.take(MAX_PROFILE_BYTES as u64 + 1)
                    .read_to_string(&mut text)
            })
            .map_err(cannot)?;
        if text.len() > MAX_PROFILE_BYTES {
            let bytes = std::fs::metadata(path).map_or(text.len() as u64, |m| m.len());
            return Err(too_large(bytes));
        }
        Self::from_yaml(&text)
    }

    /// The dependencies, in declaration order.
    pub fn dependencies(&self) -> &[DependencyConfig] {
        &self.deps
    }

    /// A dry run of [`Bank::reload`](crate::Bank::reload) (C20): what
    /// reloading `next` into a bank built from this profile would refuse,
    /// without a bank. Both profiles are valid, so nothing: every change a
    /// valid profile makes is applied, in place or by starting the
    /// dependency afresh (a changed isolation, trip policy kind or
    /// `window`, or a `max_tenants` above this profile's, the size a bank
    /// built from it gives each table). What a reload can still meet
    /// depends on the running process (the allocator refusing a new
    /// table), which a dry run cannot know.
    ///
    /// ```
    /// use breakerbank::Profile;
    /// let p = |trip: &str| Profile::from_yaml(&format!(r#"
    /// dependencies:
    ///   email_client:
    ///     isolation: global
    ///     trip: {trip}
    ///     open_duration: 15s
    ///     half_open: {{probe_budget: 1, success_threshold: 1}}
    ///     fallback: {{kind: degraded}}
    ///     recovery_bound: 2m
    /// "#)).unwrap();
    /// let running = p("{consecutive_failures: 5}");
    /// assert!(running.check_reload(&p("{consecutive_failures: 3}")).is_ok());
    /// // Applied by starting `email_client` afresh.
    /// assert!(running
    ///     .check_reload(&p("{failure_rate: 0.5, min_calls: 20, window: 10s}"))
    ///     .is_ok());
    /// ```
    pub fn check_reload(&self, next: &Profile) -> Result<(), ConfigError> {
        let _ = next;
        Ok(())
    }

    /// The bytes the dependencies' partition tables may take when the
    /// bank is built (C9): the top-level `memory_limit`, or
    /// [`DEFAULT_MEMORY_LIMIT`].
    pub fn memory_limit(&self) -> u64 {
        self.memory_limit
    }

    /// Which partitions the Prometheus exposition lists one by one: the
    /// top-level `metrics.partitions` (C14).
    pub fn partition_series(&self) -> PartitionSeries {
        self.partition_series
    }
}

/// The problem of a profile with nothing in it.
const EMPTY: &str = "the profile is empty: expected a `dependencies` mapping";

/// Most bytes of text a profile may have: a reload may take its text
/// from a network endpoint, and a profile of this size (tens of thousands
/// of dependencies) loads in a second or two.
pub const MAX_PROFILE_BYTES: usize = 16 << 20;

/// The problem of a profile longer than [`MAX_PROFILE_BYTES`].
fn too_large(bytes: u64) -> ConfigError {
    ConfigError::one(format!(
        "the profile is {bytes} bytes, more than the {MAX_PROFILE_BYTES} (16 MiB) a profile may have"
    ))
}

/// Where in the profile a mapping is, and which fields it takes. One table
/// for the parser, its hints ("did you mean", "belongs under") and the
/// test that the reference documents every field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Top,
    Metrics,
    Dependency,
    Trip,
    Backoff,
    HalfOpen,
    Fallback,
    Slo,
    Recovery,
}

impl Level {
    /// Every level, for hints that look beyond the current one.
    pub(crate) const ALL: [Level; 9] = [
        Level::Top,
        Level::Metrics,
        Level::Dependency,
        Level::Trip,
        Level::Backoff,
        Level::HalfOpen,
        Level::Fallback,
        Level::Slo,
        Level::Recovery,
    ];

    /// The fields this level takes.
    pub(crate) fn fields(self) -> &'static [&'static str] {
        match self {
            Level::Top => &["memory_limit", "metrics", "dependencies"],
            Level::Metrics => &["partitions"],
            Level::Dependency => &[
                "isolation",
                "trip",
                "open_duration",
                "backoff",
                "half_open",
                "fallback",
                "recovery_bound",
                "probe_timeout",
                "max_tenants",
                "slo",
                "mode",
            ],
            Level::Trip => &[
                "consecutive_failures",
                "failure_rate",
                "min_calls",
                "window",
                "slow_call",
            ],
            Level::Backoff => &["multiplier", "max"],
            Level::HalfOpen => &["probe_budget", "success_threshold"],
            Level::Fallback => &["kind", "code", "max_staleness"],
            Level::Slo => &["latency", "recovery"],
            Level::Recovery => &["typical", "worst"],
        }
    }

    /// The path of this level's fields as messages name them: relative to
    /// the dependency for a dependency's fields (`trip.window`).
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Level::Top | Level::Dependency => "",
            Level::Metrics => "metrics.",
            Level::Trip => "trip.",
            Level::Backoff => "backoff.",
            Level::HalfOpen => "half_open.",
            Level::Fallback => "fallback.",
            Level::Slo => "slo.",
            Level::Recovery => "slo.recovery.",
        }
    }

    /// Whether the level is inside a dependency's settings.
    fn in_dependency(self) -> bool {
        !matches!(self, Level::Top | Level::Metrics)
    }

    /// Where a field of this level is written, for "it belongs …".
    fn place(self) -> &'static str {
        match self {
            Level::Top => "at the top level of the profile",
            Level::Metrics => "under the top-level `metrics`",
            Level::Dependency => "directly under the dependency's name",
            Level::Trip => "under `trip`",
            Level::Backoff => "under `backoff`",
            Level::HalfOpen => "under `half_open`",
            Level::Fallback => "under `fallback`",
            Level::Slo => "under `slo`",
            Level::Recovery => "under `slo.recovery`",
        }
    }
}

/// A field name close enough to `name` to be what was meant: at most two
/// edits, fewer for short names.
fn near<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let allowed = (name.chars().count() / 4).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|&(d, _)| d <= allowed)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// What to say of `key`, unknown at `level`: the name meant, where it
/// belongs, or the names the level takes.
fn unknown_field_hint(level: Level, key: &str) -> String {
    if let Some(name) = near(key, level.fields().iter().copied()) {
        return format!("; did you mean `{}{name}`?", level.prefix());
    }
    // The same name at another level a user could have meant: inside a
    // dependency, the dependency's levels; at the top, the top's.
    let others = Level::ALL
        .into_iter()
        .filter(|l| *l != level && l.in_dependency() == level.in_dependency());
    for other in others.clone() {
        if other.fields().contains(&key) {
            return format!(
                "; `{key}` belongs {} (`{}{key}`)",
                other.place(),
                other.prefix()
            );
        }
    }
    for other in others {
        if let Some(name) = near(key, other.fields().iter().copied()) {
            return format!(
                "; did you mean `{}{name}`, which belongs {}?",
                other.prefix(),
                other.place()
            );
        }
    }
    let names: Vec<String> = level
        .fields()
        .iter()
        .map(|f| format!("`{}{f}`", level.prefix()))
        .collect();
    format!("; expected one of {}", names.join(", "))
}

/// A mapping's fields, checked against its level: each unknown or
/// repeated field is a problem; the others are looked up by name.
struct Fields<'n> {
    at: Option<At>,
    entries: Vec<(&'n str, &'n Node)>,
}

impl<'n> Fields<'n> {
    /// The value given for `name`, if any (null counts as not given).
    fn get(&self, name: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, v)| *k == name && !v.is_null())
            .map(|&(_, v)| v)
    }
}

/// The top level's checks: `memory_limit`, `metrics` and the dependencies.
fn validate_top(root: &Node, problems: &mut Vec<String>) -> Option<Profile> {
    let mut v = Validator {
        dep: None,
        problems,
    };
    if root.entries().is_none() {
        v.problems.push(format!(
            "the profile must be a mapping with a `dependencies` key, got {}{}",
            Shown(&root.value),
            Position(root.at)
        ));
        return None;
    }
    let top = v.fields(Level::Top, root, "the profile")?;
    let memory_limit = match top.get("memory_limit") {
        None => Some(DEFAULT_MEMORY_LIMIT),
        Some(n) => v.bytes(n),
    };
    let partition_series = match top.get("metrics") {
        None => Some(PartitionSeries::default()),
        Some(n) => v.metrics(n),
    };
    let mut deps = Vec::new();
    match top.get("dependencies") {
        None if top.entries.iter().any(|(k, _)| *k == "dependencies") => {
            v.problems.push(format!(
                "`dependencies` is empty: declare at least one dependency{}",
                Position(top.at)
            ));
        }
        None => v.problems.push(format!(
            "field `dependencies` is required but missing: the profile declares its dependencies under it{}",
            Position(top.at)
        )),
        Some(node) => match node.entries() {
            None => v.problems.push(format!(
                "field `dependencies` must be a mapping from each dependency's name to its settings, got {}{}",
                Shown(&node.value),
                Position(node.at)
            )),
            Some([]) => v.problems.push(format!(
                "`dependencies` is empty: declare at least one dependency{}",
                Position(node.at)
            )),
            Some(entries) => {
                let mut seen: HashMap<String, Option<At>> = HashMap::with_capacity(entries.len());
                for (key, settings) in entries {
                    let name = key.key_text();
                    if let Some(first) = seen.get(&name) {
                        v.problems.push(format!(
                            "dependency `{name}` is declared twice (first{}){}",
                            Position(*first),
                            Position(key.at)
                        ));
                        continue;
                    }
                    seen.insert(name.clone(), key.at);
                    let mut d = Validator {
                        dep: Some(&name),
                        problems: &mut *v.problems,
                    };
                    if let Some(cfg) = d.dependency(&name, key, settings) {
                        deps.push(cfg);
                    }
                }
            }
        },
    }
    if !v.problems.is_empty() {
        return None;
    }
    let memory_limit = memory_limit?;
    if let Some(why) = over_memory_limit(&deps, memory_limit, top.get("memory_limit")) {
        v.problems.push(why);
        return None;
    }
    Some(Profile {
        deps,
        memory_limit,
        partition_series: partition_series?,
    })
}

/// The units `memory_limit` takes, longest first where one ends another.
const BYTE_UNITS: [(&str, u64); 10] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("kB", 1_000),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("B", 1),
];

/// `memory_limit`'s value in bytes: a positive whole number of bytes, or
/// one with a unit (`512MiB`, `2GiB`, `1GB`).
fn parse_bytes(value: &Value) -> Option<u64> {
    let Value::Scalar(text, kind) = value else {
        return None;
    };
    let n = match kind {
        Kind::Int(n) => u64::try_from(*n).ok()?,
        Kind::Str => {
            let t = text.trim();
            let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let (num, unit) = t.split_at(digits);
            let scale = match unit.trim() {
                "" => 1,
                u => BYTE_UNITS
                    .iter()
                    .find(|(name, _)| *name == u)
                    .map(|&(_, scale)| scale)?,
            };
            num.parse::<u64>().ok()?.checked_mul(scale)?
        }
        _ => return None,
    };
    (n > 0).then_some(n)
}

/// The problem with `deps` whose partition tables need more than `limit`
/// bytes up front, naming the dependencies; `given` is the field as
/// written (absent: the default).
fn over_memory_limit(
    deps: &[DependencyConfig],
    limit: u64,
    given: Option<&Node>,
) -> Option<String> {
    let tables: Vec<(&str, u64)> = deps
        .iter()
        .filter(|d| d.isolation == Isolation::Tenant)
        .map(|d| (d.name.as_str(), Table::footprint(d.max_tenants)))
        .collect();
    let need = tables
        .iter()
        .fold(0u64, |sum, &(_, bytes)| sum.saturating_add(bytes));
    if need <= limit {
        return None;
    }
    let each: Vec<String> = tables
        .iter()
        .map(|(name, bytes)| format!("`{name}` ({})", mib(*bytes)))
        .collect();
    let limit_text = match given {
        Some(Node {
            value: Value::Scalar(text, _),
            ..
        }) => format!("`memory_limit: {text}`"),
        _ => "`memory_limit` (default 1GiB)".to_string(),
    };
    Some(format!(
        "the partition tables of dependencies {} need {} when the bank is built, more than {limit_text} ({limit} bytes): lower their `max_tenants` or raise `memory_limit`{}",
        each.join(", "),
        mib(need),
        Position(given.and_then(|n| n.at)),
    ))
}

/// Bytes as MiB with one decimal, for messages.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

const HTTP_METHODS: [&str; 9] = [
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE",
];

/// Why `name` looks like an inbound route rather than a client module (C2).
pub(crate) fn route_like(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is empty");
    }
    let method = HTTP_METHODS.iter().any(|m| {
        name.len() > m.len()
            && name.as_bytes()[..m.len()].eq_ignore_ascii_case(m.as_bytes())
            && name.as_bytes()[m.len()].is_ascii_whitespace()
    });
    if method {
        return Some("starts with an HTTP method");
    }
    if name.contains('/') {
        return Some("contains `/`");
    }
    if name.chars().any(char::is_whitespace) {
        return Some("contains whitespace");
    }
    None
}

/// The checks of one part of the profile, each problem pushed with the
/// dependency it concerns (if any), the field, and the position.
struct Validator<'a> {
    dep: Option<&'a str>,
    problems: &'a mut Vec<String>,
}

impl Validator<'_> {
    /// "dependency `x`: " inside a dependency, nothing at the top.
    fn head(&self) -> String {
        match self.dep {
            Some(dep) => format!("dependency `{dep}`: "),
            None => String::new(),
        }
    }

    fn bad(&mut self, field: &str, what: impl fmt::Display, at: Option<At>) {
        let head = self.head();
        self.problems
            .push(format!("{head}field `{field}` {what}{}", Position(at)));
    }

    /// The fields of `node`, a mapping at `level`: `None` (a problem
    /// pushed) when it is not one. `what` names it for that message.
    fn fields<'n>(&mut self, level: Level, node: &'n Node, what: &str) -> Option<Fields<'n>> {
        let Some(entries) = node.entries() else {
            let head = self.head();
            self.problems.push(format!(
                "{head}{what} must be a mapping, got {}{}",
                Shown(&node.value),
                Position(node.at)
            ));
            return None;
        };
        let mut out: Vec<(&'n str, &'n Node)> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let Value::Scalar(name, _) = &key.value else {
                let head = self.head();
                self.problems.push(format!(
                    "{head}{what} has {} as a field name: field names are words like `{}`{}",
                    Shown(&key.value),
                    level.fields()[0],
                    Position(key.at)
                ));
                continue;
            };
            if !level.fields().contains(&name.as_str()) {
                let head = self.head();
                self.problems.push(format!(
                    "{head}unknown field `{}{name}`{}{}",
                    level.prefix(),
                    unknown_field_hint(level, name),
                    Position(key.at)
                ));
                continue;
            }
            if out.iter().any(|(k, _)| k == name) {
                self.bad(
                    &format!("{}{name}", level.prefix()),
                    "is given twice: keep one",
                    key.at,
                );
                continue;
            }
            out.push((name, value));
        }
        Some(Fields {
            at: node.at,
            entries: out,
        })
    }

    fn required<'n>(
        &mut self,
        field: &str,
        v: Option<&'n Node>,
        at: Option<At>,
    ) -> Option<&'n Node> {
        if v.is_none() {
            self.bad(field, "is required but missing", at);
        }
        v
    }

    /// A scalar's text (a number or word as written); a list or mapping
    /// is a problem, `what` saying what was expected.
    fn text(&mut self, field: &str, v: Option<&Node>, what: &str) -> Option<String> {
        let node = v?;
        match &node.value {
            Value::Scalar(text, _) => Some(text.clone()),
            other => {
                self.bad(
                    field,
                    format!("must be {what}, got {}", Shown(other)),
                    node.at,
                );
                None
            }
        }
    }

    fn duration(&mut self, field: &str, v: Option<&Node>) -> Option<Duration> {
        const LIKE: &str = "a positive duration like `250ms`, `30s`, `5m` or `1h`";
        let at = v?.at;
        let s = self.text(field, v, LIKE)?;
        match humantime::parse_duration(s.trim()) {
            Ok(d) if d.is_zero() => {
                self.bad(field, format!("must be a positive duration, got `{s}`"), at);
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                let why = match e {
                    humantime::DurationError::UnknownUnit { unit, .. } => {
                        format!(" (`{unit}` is not a unit: use `ms`, `s`, `m`, `h` or `d`)")
                    }
                    humantime::DurationError::NumberOverflow => " (too long)".to_string(),
                    _ => String::new(),
                };
                self.bad(field, format!("must be {LIKE}, got `{s}`{why}"), at);
                None
            }
        }
    }

    fn count(&mut self, field: &str, v: Option<&Node>, max: u32) -> Option<u32> {
        let node = v?;
        match node.value {
            Value::Scalar(_, Kind::Int(n)) if (1..=i64::from(max)).contains(&n) => {
                u32::try_from(n).ok()
            }
            Value::Scalar(_, Kind::Int(n)) => {
                self.bad(
                    field,
                    format!("must be between 1 and {max}, got {n}"),
                    node.at,
                );
                None
            }
            ref other => {
                self.bad(
                    field,
                    format!(
                        "must be a whole number between 1 and {max}, got {}",
                        Shown(other)
                    ),
                    node.at,
                );
                None
            }
        }
    }

    fn number(&mut self, field: &str, v: Option<&Node>) -> Option<f64> {
        let node = v?;
        match node.value {
            Value::Scalar(_, Kind::Float(x)) => Some(x),
            Value::Scalar(_, Kind::Int(n)) => Some(n as f64),
            ref other => {
                self.bad(
                    field,
                    format!("must be a number, got {}", Shown(other)),
                    node.at,
                );
                None
            }
        }
    }

    fn bytes(&mut self, node: &Node) -> Option<u64> {
        let n = parse_bytes(&node.value);
        if n.is_none() {
            self.bad(
                "memory_limit",
                format!(
                    "must be a positive size in bytes like `512MiB`, `2GiB` or `1073741824`, got {}",
                    Shown(&node.value)
                ),
                node.at,
            );
        }
        n
    }

    /// The top-level `metrics` mapping: `{partitions: not_closed | all}`.
    fn metrics(&mut self, node: &Node) -> Option<PartitionSeries> {
        let f = self.fields(Level::Metrics, node, "field `metrics`")?;
        let Some(p) = f.get("partitions") else {
            return Some(PartitionSeries::default());
        };
        match &p.value {
            Value::Scalar(s, Kind::Str) if s == "not_closed" => Some(PartitionSeries::NotClosed),
            Value::Scalar(s, Kind::Str) if s == "all" => Some(PartitionSeries::All),
            other => {
                self.bad(
                    "metrics.partitions",
                    format!("must be `not_closed` or `all`, got {}", Shown(other)),
                    p.at,
                );
                None
            }
        }
    }

    fn dependency(&mut self, name: &str, key: &Node, node: &Node) -> Option<DependencyConfig> {
        let before = self.problems.len();
        if let Some(why) = route_like(name) {
            self.problems.push(format!(
                "dependency `{name}`: name {why}; name a dependency after its client module (e.g. `payments_client`), not an inbound route{}",
                Position(key.at)
            ));
        }
        if node.is_null() {
            self.problems.push(format!(
                "dependency `{name}`: has no settings: give its `isolation`, `trip`, `open_duration`, `half_open`, `fallback` and `recovery_bound`{}",
                Position(key.at)
            ));
            return None;
        }
        let f = self.fields(Level::Dependency, node, "its settings")?;
        let at = f.at;
        let iso = self.required("isolation", f.get("isolation"), at);
        let isolation = match self
            .text("isolation", iso, "`global` or `tenant`")
            .as_deref()
        {
            Some("global") => Some(Isolation::Global),
            Some("tenant") => Some(Isolation::Tenant),
            Some(other) => {
                self.bad(
                    "isolation",
                    format!("must be `global` or `tenant`, got `{other}`"),
                    iso.and_then(|n| n.at),
                );
                None
            }
            None => None,
        };
        let (trip, slow_call) = match self.required("trip", f.get("trip"), at) {
            Some(t) => self.trip(t),
            None => (None, None),
        };
        let open = self.required("open_duration", f.get("open_duration"), at);
        let open_duration = self.duration("open_duration", open);
        let backoff = f
            .get("backoff")
            .and_then(|b| self.backoff(b, open_duration));
        let (probe_budget, success_threshold) =
            match self.required("half_open", f.get("half_open"), at) {
                Some(h) => match self.fields(Level::HalfOpen, h, "field `half_open`") {
                    Some(h) => {
                        let pb =
                            self.required("half_open.probe_budget", h.get("probe_budget"), h.at);
                        let st = self.required(
                            "half_open.success_threshold",
                            h.get("success_threshold"),
                            h.at,
                        );
                        (
                            self.count("half_open.probe_budget", pb, MAX_PROBES),
                            self.count("half_open.success_threshold", st, MAX_COUNT),
                        )
                    }
                    None => (None, None),
                },
                None => (None, None),
            };
        let fallback = self
            .required("fallback", f.get("fallback"), at)
            .and_then(|n| self.fallback(n));
        let rb = self.required("recovery_bound", f.get("recovery_bound"), at);
        let recovery_bound = self.duration("recovery_bound", rb);
        let probe_timeout = self.duration("probe_timeout", f.get("probe_timeout"));
        let max_tenants = match (f.get("max_tenants"), isolation) {
            (Some(n), Some(Isolation::Global)) => {
                self.bad(
                    "max_tenants",
                    "is only allowed with `isolation: tenant`",
                    n.at,
                );
                None
            }
            (Some(n), _) => self.count("max_tenants", Some(n), MAX_MAX_TENANTS),
            (None, _) => Some(DEFAULT_MAX_TENANTS),
        };
        let slo = f.get("slo").and_then(|n| self.slo(n));
        let mode_node = f.get("mode");
        let mode = match self
            .text("mode", mode_node, "`enforce` or `observe`")
            .as_deref()
        {
            None | Some("enforce") => Some(Mode::Enforce),
            Some("observe") => Some(Mode::Observe),
            Some(other) => {
                self.bad(
                    "mode",
                    format!("must be `enforce` or `observe`, got `{other}`"),
                    mode_node.and_then(|n| n.at),
                );
                None
            }
        };
        if self.problems.len() != before {
            return None;
        }
        Some(DependencyConfig {
            name: name.to_string(),
            isolation: isolation?,
            trip: trip?,
            slow_call,
            open_duration: open_duration?,
            backoff,
            probe_budget: probe_budget?,
            success_threshold: success_threshold?,
            fallback: fallback?,
            recovery_bound: recovery_bound?,
            probe_timeout: probe_timeout.or(recovery_bound)?,
            max_tenants: max_tenants?,
            slo,
            mode: mode?,
        })
    }

    fn trip(&mut self, node: &Node) -> (Option<TripPolicy>, Option<Duration>) {
        let Some(t) = self.fields(Level::Trip, node, "field `trip`") else {
            return (None, None);
        };
        let slow = self.duration("trip.slow_call", t.get("slow_call"));
        let policy = match (t.get("consecutive_failures"), t.get("failure_rate")) {
            (Some(_), Some(_)) => {
                self.bad(
                    "trip",
                    "sets both `consecutive_failures` and `failure_rate`; choose one",
                    t.at,
                );
                None
            }
            (None, None) => {
                self.bad(
                    "trip",
                    "needs `consecutive_failures: N` or `failure_rate: R` with `min_calls` and `window`",
                    t.at,
                );
                None
            }
            (Some(n), None) => {
                if t.get("min_calls").is_some() || t.get("window").is_some() {
                    self.bad(
                        "trip",
                        "`min_calls` and `window` only go with `failure_rate`",
                        t.at,
                    );
                }
                self.count("trip.consecutive_failures", Some(n), MAX_COUNT)
                    .map(TripPolicy::ConsecutiveFailures)
            }
            (None, Some(r)) => {
                let rate = self.number("trip.failure_rate", Some(r));
                let rate = match rate {
                    Some(rate) if !(rate.is_finite() && rate > 0.0 && rate <= 1.0) => {
                        self.bad(
                            "trip.failure_rate",
                            format!("must be in (0, 1], got {rate}"),
                            r.at,
                        );
                        None
                    }
                    rate => rate,
                };
                let mc = self.required("trip.min_calls", t.get("min_calls"), t.at);
                let min_calls = self.count("trip.min_calls", mc, MAX_MIN_CALLS);
                let w = self.required("trip.window", t.get("window"), t.at);
                let window = self.duration("trip.window", w);
                match (rate, min_calls, window) {
                    (Some(rate), Some(min_calls), Some(window)) => Some(TripPolicy::FailureRate {
                        rate,
                        min_calls,
                        window,
                    }),
                    _ => None,
                }
            }
        };
        (policy, slow)
    }

    fn backoff(&mut self, node: &Node, open: Option<Duration>) -> Option<Backoff> {
        let b = self.fields(Level::Backoff, node, "field `backoff`")?;
        let m = self.required("backoff.multiplier", b.get("multiplier"), b.at);
        let m = self.number("backoff.multiplier", m);
        let max_node = self.required("backoff.max", b.get("max"), b.at);
        let max = self.duration("backoff.max", max_node);
        let m = match m {
            Some(m) if !(m.is_finite() && m >= 1.0) => {
                self.bad(
                    "backoff.multiplier",
                    format!("must be at least 1, got {m}"),
                    b.get("multiplier").and_then(|n| n.at),
                );
                None
            }
            m => m,
        };
        if let (Some(max), Some(open)) = (max, open) {
            if max < open {
                self.bad(
                    "backoff.max",
                    format!("({max:?}) must not be shorter than `open_duration` ({open:?})"),
                    max_node.and_then(|n| n.at),
                );
                return None;
            }
        }
        Some(Backoff {
            multiplier: m?,
            max: max?,
        })
    }

    fn fallback(&mut self, node: &Node) -> Option<Fallback> {
        let f = self.fields(Level::Fallback, node, "field `fallback`")?;
        let kind_node = self.required("fallback.kind", f.get("kind"), f.at);
        let kind = self.text("fallback.kind", kind_node, "`stale`, `degraded` or `error`")?;
        let code = f.get("code");
        let max_staleness = f.get("max_staleness");
        let at = |n: Option<&Node>| n.and_then(|n| n.at);
        match kind.as_str() {
            "error" => {
                if max_staleness.is_some() {
                    self.bad(
                        "fallback.max_staleness",
                        "only goes with `kind: stale`",
                        at(max_staleness),
                    );
                }
                let c = self.required("fallback.code", code, f.at);
                match self.text("fallback.code", c, "a code like `PAYMENT_UNAVAILABLE`") {
                    Some(c) if c.trim().is_empty() => {
                        self.bad("fallback.code", "must not be empty", at(code));
                        None
                    }
                    Some(code) => Some(Fallback::Error { code }),
                    None => None,
                }
            }
            "stale" => {
                if code.is_some() {
                    self.bad("fallback.code", "only goes with `kind: error`", at(code));
                }
                let ms = self.required("fallback.max_staleness", max_staleness, f.at);
                self.duration("fallback.max_staleness", ms)
                    .map(|max_staleness| Fallback::Stale { max_staleness })
            }
            "degraded" => {
                if code.is_some() || max_staleness.is_some() {
                    self.bad(
                        "fallback",
                        "`kind: degraded` takes neither `code` nor `max_staleness`",
                        at(code.or(max_staleness)),
                    );
                }
                Some(Fallback::Degraded)
            }
            other => {
                self.bad(
                    "fallback.kind",
                    format!("must be `stale`, `degraded` or `error`, got `{other}`"),
                    at(kind_node),
                );
                None
            }
        }
    }
}
