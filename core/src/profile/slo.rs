//! A dependency's `slo` block (C21): the answer time it promises and how
//! long its outages typically and at worst last. The breaker never reads
//! it; `check`'s advice and `tune` size the breaker from it.

use super::{RawDuration, Validator};
use serde::Deserialize;
use std::time::Duration;

/// What a dependency promises (the profile's `slo`, C21).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slo {
    /// The answer time it promises (`slo.latency`), if declared.
    pub latency: Option<Duration>,
    /// How long its outages last (`slo.recovery`), if declared.
    pub recovery: Option<Recovery>,
}

/// How long a dependency's outages last (`slo.recovery`): `worst` is at
/// least `typical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The length of a typical outage (`slo.recovery.typical`).
    pub typical: Duration,
    /// The longest outage to plan for (`slo.recovery.worst`).
    pub worst: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSlo {
    #[serde(default, deserialize_with = "super::scalar")]
    latency: RawDuration,
    recovery: Option<RawRecovery>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecovery {
    #[serde(default, deserialize_with = "super::scalar")]
    typical: RawDuration,
    #[serde(default, deserialize_with = "super::scalar")]
    worst: RawDuration,
}

impl Validator<'_> {
    /// The `slo` block, or `None` with its problems recorded.
    pub(super) fn slo(&mut self, raw: RawSlo) -> Option<Slo> {
        let before = self.problems.len();
        if raw.latency.is_none() && raw.recovery.is_none() {
            self.bad(
                "slo",
                "declares nothing: give `latency`, `recovery: {typical, worst}` or both",
            );
            return None;
        }
        let latency = self.duration("slo.latency", raw.latency);
        let recovery = raw.recovery.and_then(|r| {
            let typical = self.required("slo.recovery.typical", r.typical);
            let typical = self.duration("slo.recovery.typical", typical);
            let worst = self.required("slo.recovery.worst", r.worst);
            let worst = self.duration("slo.recovery.worst", worst);
            let (typical, worst) = (typical?, worst?);
            if worst < typical {
                self.bad(
                    "slo.recovery.worst",
                    format!(
                        "({worst:?}) must not be shorter than `slo.recovery.typical` ({typical:?})"
                    ),
                );
                return None;
            }
            Some(Recovery { typical, worst })
        });
        (self.problems.len() == before).then_some(Slo { latency, recovery })
    }
}
