//! The YAML profile: parsed with serde (`deny_unknown_fields`), then
//! validated into [`DependencyConfig`]s. Every rejection names the
//! dependency and the field.

use crate::fallback::Fallback;
use crate::state::word::{MAX_COUNT, MAX_PROBES};
use crate::table::Table;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::Path;
use std::time::Duration;

mod advice;
#[cfg(test)]
mod fields;
mod slo;

pub use advice::{Advice, AdviceKind};
pub use slo::{Recovery, Slo};

/// A field written as a string (durations), as [`scalar`] reads it.
type RawDuration = Option<String>;

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
        if text.trim().is_empty() {
            return Err(ConfigError::one(EMPTY));
        }
        let raw: RawProfile = serde_yaml_ng::from_str(text)
            .map_err(|e| ConfigError::one(first_position_only(&parse_message(&e))))?;
        Self::validate(raw)
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
        // Through the text parser, so data and text share every check and
        // message; positions in that text mean nothing to the caller.
        let text = serde_yaml_ng::to_string(&value)
            .map_err(|e| ConfigError::one(format!("the profile cannot be read as data: {e}")))?;
        let raw: RawProfile = serde_yaml_ng::from_str(&text)
            .map_err(|e| ConfigError::one(without_positions(&parse_message(&e))))?;
        Self::validate(raw)
    }

    /// The checks after parsing, the same for text and for data.
    fn validate(raw: RawProfile) -> Result<Profile, ConfigError> {
        let mut problems = Vec::new();
        let mut deps = Vec::new();
        let memory_limit = match &raw.memory_limit {
            None => Some(DEFAULT_MEMORY_LIMIT),
            Some(v) => parse_bytes(v).map_err(|why| problems.push(why)).ok(),
        };
        let partition_series = match &raw.metrics {
            None => PartitionSeries::default(),
            Some(v) => parse_metrics(v).unwrap_or_else(|why| {
                problems.push(why);
                PartitionSeries::default()
            }),
        };
        if raw.dependencies.0.is_empty() {
            problems.push("`dependencies` is empty: declare at least one dependency".into());
        }
        for (name, dep) in raw.dependencies.0 {
            let mut v = Validator {
                dep: &name,
                problems: &mut problems,
            };
            if let Some(cfg) = v.dependency(&name, dep) {
                deps.push(cfg);
            }
        }
        if let (true, Some(limit)) = (problems.is_empty(), memory_limit) {
            if let Some(why) = over_memory_limit(&deps, limit, raw.memory_limit.as_ref()) {
                problems.push(why);
            }
        }
        match (problems.is_empty(), memory_limit) {
            (true, Some(memory_limit)) => Ok(Profile {
                deps,
                memory_limit,
                partition_series,
            }),
            _ => Err(ConfigError { problems }),
        }
    }

    /// Reads and validates a YAML profile file.
    pub fn load(path: impl AsRef<Path>) -> Result<Profile, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::one(format!("cannot read profile `{}`: {e}", path.display()))
        })?;
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

/// A parse-level problem, in the profile's words where serde's differ:
/// the parser's path (`dependencies.payments_client.trip.window: …`)
/// becomes the dependency and the field, as validation names them.
fn parse_message(e: &serde_yaml_ng::Error) -> String {
    let msg = e
        .to_string()
        .replace("struct RawProfile", "a mapping with a `dependencies` key");
    let Some(rest) = msg.strip_prefix("dependencies: ") else {
        return msg;
    };
    let Some(name) = rest
        .strip_prefix("dependency `")
        .and_then(|r| r.split_once("`: "))
        .map(|(name, _)| name)
    else {
        return format!("field `dependencies`: {rest}");
    };
    let head = format!("dependency `{name}`: ");
    let inner = &rest[head.len()..];
    let path = format!("dependencies.{name}");
    match inner.strip_prefix(path.as_str()) {
        Some(after) => match after.strip_prefix(": ") {
            Some(m) => format!("{head}{m}"),
            None => match after.strip_prefix('.').and_then(|a| a.split_once(": ")) {
                Some((field, m)) => format!("{head}field `{field}`: {m}"),
                None => rest.to_string(),
            },
        },
        None => rest.to_string(),
    }
}

/// The spans of every " at line N column M" in `msg`.
fn positions(msg: &str) -> Vec<std::ops::Range<usize>> {
    const AT: &str = " at line ";
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = msg[from..].find(AT) {
        let start = from + i;
        let rest = &msg[start + AT.len()..];
        let line = digits(rest);
        match rest[line..].strip_prefix(" column ") {
            Some(col) if line > 0 && digits(col) > 0 => {
                let end = start + AT.len() + line + " column ".len() + digits(col);
                out.push(start..end);
                from = end;
            }
            _ => from = start + AT.len(),
        }
    }
    out
}

/// `msg` with one position, the innermost (the parser adds one per level).
fn first_position_only(msg: &str) -> String {
    let mut out = msg.to_string();
    for span in positions(msg).into_iter().skip(1).rev() {
        out.replace_range(span, "");
    }
    out
}

/// `msg` without positions.
fn without_positions(msg: &str) -> String {
    let mut out = msg.to_string();
    for span in positions(msg).into_iter().rev() {
        out.replace_range(span, "");
    }
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    /// Any YAML value: every malformed one gets the same message, naming
    /// the field (an untagged enum's error would not).
    memory_limit: Option<serde_yaml_ng::Value>,
    /// As `memory_limit`: checked by hand, for messages in the profile's
    /// words.
    metrics: Option<serde_yaml_ng::Value>,
    dependencies: DepMap,
}

/// The top-level `metrics` mapping: `{partitions: not_closed | all}`.
fn parse_metrics(v: &serde_yaml_ng::Value) -> Result<PartitionSeries, String> {
    use serde_yaml_ng::Value;
    let shown = |v: &Value| {
        serde_yaml_ng::to_string(v)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let Value::Mapping(m) = v else {
        return Err(format!(
            "field `metrics` must be a mapping like `{{partitions: not_closed}}`, got `{}`",
            shown(v)
        ));
    };
    let mut series = PartitionSeries::default();
    for (k, v) in m {
        match (k.as_str(), v.as_str()) {
            (Some("partitions"), Some("not_closed")) => series = PartitionSeries::NotClosed,
            (Some("partitions"), Some("all")) => series = PartitionSeries::All,
            (Some("partitions"), _) => {
                return Err(format!(
                    "field `metrics.partitions` must be `not_closed` or `all`, got `{}`",
                    shown(v)
                ))
            }
            _ => {
                return Err(format!(
                    "unknown field `metrics.{}`: `metrics` takes only `partitions` (`not_closed` or `all`)",
                    shown(k)
                ))
            }
        }
    }
    Ok(series)
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
fn parse_bytes(v: &serde_yaml_ng::Value) -> Result<u64, String> {
    let bad = |got: &dyn fmt::Display| {
        format!(
            "field `memory_limit` must be a positive size in bytes like `512MiB`, `2GiB` or `1073741824`, got `{got}`"
        )
    };
    let n = match v {
        serde_yaml_ng::Value::Number(n) => n.as_u64().ok_or_else(|| bad(n))?,
        serde_yaml_ng::Value::String(text) => {
            let t = text.trim();
            let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let (num, unit) = t.split_at(digits);
            let scale = match unit.trim() {
                "" => 1,
                u => BYTE_UNITS
                    .iter()
                    .find(|(name, _)| *name == u)
                    .map(|&(_, scale)| scale)
                    .ok_or_else(|| bad(text))?,
            };
            num.parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(scale))
                .ok_or_else(|| bad(text))?
        }
        other => {
            let shown = serde_yaml_ng::to_string(other).unwrap_or_default();
            return Err(bad(&shown.trim()));
        }
    };
    if n == 0 {
        return Err(bad(&n));
    }
    Ok(n)
}

/// The problem with `deps` whose partition tables need more than `limit`
/// bytes up front, naming the dependencies; `given` is the field as
/// written (absent: the default).
fn over_memory_limit(
    deps: &[DependencyConfig],
    limit: u64,
    given: Option<&serde_yaml_ng::Value>,
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
        Some(serde_yaml_ng::Value::String(s)) => format!("`memory_limit: {s}`"),
        Some(serde_yaml_ng::Value::Number(n)) => format!("`memory_limit: {n}`"),
        _ => "`memory_limit` (default 1GiB)".to_string(),
    };
    Some(format!(
        "the partition tables of dependencies {} need {} when the bank is built, more than {limit_text} ({limit} bytes): lower their `max_tenants` or raise `memory_limit`",
        each.join(", "),
        mib(need),
    ))
}

/// Bytes as MiB with one decimal, for messages.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// The `dependencies` mapping, keeping order and rejecting duplicate names
/// (serde's map types would silently keep the last).
struct DepMap(Vec<(String, RawDep)>);

impl<'de> Deserialize<'de> for DepMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DepMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping from dependency name to its settings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DepMap, A::Error> {
                let mut out: Vec<(String, RawDep)> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    if out.iter().any(|(n, _)| *n == name) {
                        return Err(de::Error::custom(format!(
                            "dependency `{name}` is declared twice"
                        )));
                    }
                    let dep = map
                        .next_value::<RawDep>()
                        .map_err(|e| de::Error::custom(format!("dependency `{name}`: {e}")))?;
                    out.push((name, dep));
                }
                Ok(DepMap(out))
            }
            fn visit_unit<E: de::Error>(self) -> Result<DepMap, E> {
                Ok(DepMap(Vec::new()))
            }
        }
        // Any, not map: `dependencies: null` reaches `visit_unit` (the
        // empty mapping's message) as `dependencies:` does.
        d.deserialize_any(V)
    }
}

/// A field written as a string in the profile (durations, names, codes):
/// any YAML scalar, as its text. YAML text leaves `10` untyped while a
/// value built in code holds the number 10; both reach the field's own
/// check (`max_staleness: 10` needs a unit), so text and data get the same
/// message.
fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDep {
    #[serde(default, deserialize_with = "scalar")]
    isolation: Option<String>,
    trip: Option<RawTrip>,
    #[serde(default, deserialize_with = "scalar")]
    open_duration: Option<String>,
    backoff: Option<RawBackoff>,
    half_open: Option<RawHalfOpen>,
    fallback: Option<RawFallback>,
    #[serde(default, deserialize_with = "scalar")]
    recovery_bound: Option<String>,
    #[serde(default, deserialize_with = "scalar")]
    probe_timeout: Option<String>,
    max_tenants: Option<i64>,
    slo: Option<slo::RawSlo>,
    #[serde(default, deserialize_with = "scalar")]
    mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrip {
    consecutive_failures: Option<i64>,
    failure_rate: Option<f64>,
    min_calls: Option<i64>,
    #[serde(default, deserialize_with = "scalar")]
    window: Option<String>,
    #[serde(default, deserialize_with = "scalar")]
    slow_call: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBackoff {
    multiplier: Option<f64>,
    #[serde(default, deserialize_with = "scalar")]
    max: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHalfOpen {
    probe_budget: Option<i64>,
    success_threshold: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFallback {
    #[serde(default, deserialize_with = "scalar")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "scalar")]
    code: Option<String>,
    #[serde(default, deserialize_with = "scalar")]
    max_staleness: Option<String>,
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

struct Validator<'a> {
    dep: &'a str,
    problems: &'a mut Vec<String>,
}

impl Validator<'_> {
    fn bad(&mut self, field: &str, what: impl fmt::Display) {
        self.problems
            .push(format!("dependency `{}`: field `{field}` {what}", self.dep));
    }

    fn required<T>(&mut self, field: &str, v: Option<T>) -> Option<T> {
        if v.is_none() {
            self.bad(field, "is required but missing");
        }
        v
    }

    fn duration(&mut self, field: &str, v: Option<String>) -> Option<Duration> {
        let s = v?;
        match humantime::parse_duration(s.trim()) {
            Ok(d) if d.is_zero() => {
                self.bad(field, format!("must be a positive duration, got `{s}`"));
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                self.bad(
                    field,
                    format!("must be a positive duration like `250ms`, `30s`, `5m` or `1h`, got `{s}` ({e})"),
                );
                None
            }
        }
    }

    fn count(&mut self, field: &str, v: Option<i64>, max: u32) -> Option<u32> {
        let n = v?;
        if n < 1 || n > i64::from(max) {
            self.bad(field, format!("must be between 1 and {max}, got {n}"));
            return None;
        }
        u32::try_from(n).ok()
    }

    fn dependency(&mut self, name: &str, raw: RawDep) -> Option<DependencyConfig> {
        let before = self.problems.len();
        if let Some(why) = route_like(name) {
            self.problems.push(format!(
                "dependency `{name}`: name {why}; name a dependency after its client module (e.g. `payments_client`), not an inbound route"
            ));
        }
        let isolation = match self.required("isolation", raw.isolation).as_deref() {
            Some("global") => Some(Isolation::Global),
            Some("tenant") => Some(Isolation::Tenant),
            Some(other) => {
                self.bad(
                    "isolation",
                    format!("must be `global` or `tenant`, got `{other}`"),
                );
                None
            }
            None => None,
        };
        let (trip, slow_call) = match self.required("trip", raw.trip) {
            Some(t) => self.trip(t),
            None => (None, None),
        };
        let open_duration = self.required("open_duration", raw.open_duration);
        let open_duration = self.duration("open_duration", open_duration);
        let backoff = raw.backoff.and_then(|b| self.backoff(b, open_duration));
        let (probe_budget, success_threshold) = match self.required("half_open", raw.half_open) {
            Some(h) => {
                let pb = self.required("half_open.probe_budget", h.probe_budget);
                let st = self.required("half_open.success_threshold", h.success_threshold);
                (
                    self.count("half_open.probe_budget", pb, MAX_PROBES),
                    self.count("half_open.success_threshold", st, MAX_COUNT),
                )
            }
            None => (None, None),
        };
        let fallback = self
            .required("fallback", raw.fallback)
            .and_then(|f| self.fallback(f));
        let recovery_bound = self.required("recovery_bound", raw.recovery_bound);
        let recovery_bound = self.duration("recovery_bound", recovery_bound);
        let probe_timeout = self.duration("probe_timeout", raw.probe_timeout);
        let max_tenants = match (raw.max_tenants, isolation) {
            (Some(_), Some(Isolation::Global)) => {
                self.bad("max_tenants", "is only allowed with `isolation: tenant`");
                None
            }
            (Some(n), _) => self.count("max_tenants", Some(n), MAX_MAX_TENANTS),
            (None, _) => Some(DEFAULT_MAX_TENANTS),
        };
        let slo = raw.slo.and_then(|s| self.slo(s));
        let mode = match raw.mode.as_deref() {
            None | Some("enforce") => Some(Mode::Enforce),
            Some("observe") => Some(Mode::Observe),
            Some(other) => {
                self.bad(
                    "mode",
                    format!("must be `enforce` or `observe`, got `{other}`"),
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

    fn trip(&mut self, t: RawTrip) -> (Option<TripPolicy>, Option<Duration>) {
        let slow = self.duration("trip.slow_call", t.slow_call);
        let policy = match (t.consecutive_failures, t.failure_rate) {
            (Some(_), Some(_)) => {
                self.bad(
                    "trip",
                    "sets both `consecutive_failures` and `failure_rate`; choose one",
                );
                None
            }
            (None, None) => {
                self.bad(
                    "trip",
                    "needs `consecutive_failures: N` or `failure_rate: R` with `min_calls` and `window`",
                );
                None
            }
            (Some(n), None) => {
                if t.min_calls.is_some() || t.window.is_some() {
                    self.bad(
                        "trip",
                        "`min_calls` and `window` only go with `failure_rate`",
                    );
                }
                self.count("trip.consecutive_failures", Some(n), MAX_COUNT)
                    .map(TripPolicy::ConsecutiveFailures)
            }
            (None, Some(rate)) => {
                let rate_ok = rate.is_finite() && rate > 0.0 && rate <= 1.0;
                if !rate_ok {
                    self.bad(
                        "trip.failure_rate",
                        format!("must be in (0, 1], got {rate}"),
                    );
                }
                let mc = self.required("trip.min_calls", t.min_calls);
                let min_calls = self.count("trip.min_calls", mc, MAX_MIN_CALLS);
                let w = self.required("trip.window", t.window);
                let window = self.duration("trip.window", w);
                match (rate_ok, min_calls, window) {
                    (true, Some(min_calls), Some(window)) => Some(TripPolicy::FailureRate {
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

    fn backoff(&mut self, b: RawBackoff, open: Option<Duration>) -> Option<Backoff> {
        let m = self.required("backoff.multiplier", b.multiplier);
        let max = self.required("backoff.max", b.max);
        let max = self.duration("backoff.max", max);
        let m = match m {
            Some(m) if !(m.is_finite() && m >= 1.0) => {
                self.bad("backoff.multiplier", format!("must be at least 1, got {m}"));
                None
            }
            m => m,
        };
        if let (Some(max), Some(open)) = (max, open) {
            if max < open {
                self.bad(
                    "backoff.max",
                    format!("({max:?}) must not be shorter than `open_duration` ({open:?})"),
                );
                return None;
            }
        }
        Some(Backoff {
            multiplier: m?,
            max: max?,
        })
    }

    fn fallback(&mut self, f: RawFallback) -> Option<Fallback> {
        let kind = self.required("fallback.kind", f.kind)?;
        match kind.as_str() {
            "error" => {
                if f.max_staleness.is_some() {
                    self.bad("fallback.max_staleness", "only goes with `kind: stale`");
                }
                match self.required("fallback.code", f.code) {
                    Some(c) if c.trim().is_empty() => {
                        self.bad("fallback.code", "must not be empty");
                        None
                    }
                    Some(code) => Some(Fallback::Error { code }),
                    None => None,
                }
            }
            "stale" => {
                if f.code.is_some() {
                    self.bad("fallback.code", "only goes with `kind: error`");
                }
                let ms = self.required("fallback.max_staleness", f.max_staleness);
                self.duration("fallback.max_staleness", ms)
                    .map(|max_staleness| Fallback::Stale { max_staleness })
            }
            "degraded" => {
                if f.code.is_some() || f.max_staleness.is_some() {
                    self.bad(
                        "fallback",
                        "`kind: degraded` takes neither `code` nor `max_staleness`",
                    );
                }
                Some(Fallback::Degraded)
            }
            other => {
                self.bad(
                    "fallback.kind",
                    format!("must be `stale`, `degraded` or `error`, got `{other}`"),
                );
                None
            }
        }
    }
}
