"""breakerbank: a bank of circuit breakers for outbound calls.

One breaker per downstream dependency and isolation partition (the tenant,
for a tenant-scoped dependency), admission decided lock-free in the Rust
core, and an explicit fallback whenever a call is not admitted.

>>> import breakerbank as bb
>>> clock = bb.ManualClock()
>>> bank = bb.Bank.from_yaml(PROFILE, clock=clock)       # doctest: +SKIP
>>> bank["payments_client"].call(charge, order, tenant="acme")  # doctest: +SKIP

The names here are a fixed public API; the user guide is the repository's
``docs/guide/``, every profile field is in ``docs/reference/profile.md``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from ._native import (
    Bank,
    BreakerError,
    ConfigError,
    DeadlineExpired,
    Decision,
    Dependency,
    DependencyUnavailable,
    Fallback,
    InvalidTenant,
    ManualClock,
    OutcomeAlreadyRecorded,
    TenantRequired,
    UnknownDependency,
)

try:
    __version__ = _version("breakerbank")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "Bank",
    "BreakerError",
    "ConfigError",
    "DeadlineExpired",
    "Decision",
    "Dependency",
    "DependencyUnavailable",
    "Fallback",
    "InvalidTenant",
    "ManualClock",
    "OutcomeAlreadyRecorded",
    "TenantRequired",
    "UnknownDependency",
    "__version__",
]
