//! A dependency's `slo` block (C21): the answer time it promises and how
//! long its outages typically and at worst last. The breaker never reads
//! it; `check`'s advice and `tune` size the breaker from it.

use super::yaml::Node;
use super::{Level, Validator};
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

impl Validator<'_> {
    /// The `slo` block, or `None` with its problems recorded.
    pub(super) fn slo(&mut self, node: &Node) -> Option<Slo> {
        let before = self.problems.len();
        let f = self.fields(Level::Slo, node, "field `slo`")?;
        let (latency, recovery) = (f.get("latency"), f.get("recovery"));
        if latency.is_none() && recovery.is_none() {
            self.bad(
                "slo",
                "declares nothing: give `latency`, `recovery: {typical, worst}` or both",
                f.at,
            );
            return None;
        }
        let latency = self.duration("slo.latency", latency);
        let recovery = recovery.and_then(|r| {
            let r = self.fields(Level::Recovery, r, "field `slo.recovery`")?;
            let t = self.required("slo.recovery.typical", r.get("typical"), r.at);
            let typical = self.duration("slo.recovery.typical", t);
            let w = self.required("slo.recovery.worst", r.get("worst"), r.at);
            let worst = self.duration("slo.recovery.worst", w);
            let (typical, worst) = (typical?, worst?);
            if worst < typical {
                self.bad(
                    "slo.recovery.worst",
                    format!(
                        "({worst:?}) must not be shorter than `slo.recovery.typical` ({typical:?})"
                    ),
                    w.and_then(|n| n.at),
                );
                return None;
            }
            Some(Recovery { typical, worst })
        });
        (self.problems.len() == before).then_some(Slo { latency, recovery })
    }
}
