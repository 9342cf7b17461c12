"""Type stubs for the native half of breakerbank (hand-written, checked by
``python -m mypy.stubtest breakerbank``)."""

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from os import PathLike
from types import TracebackType
from typing import Any, Literal, TypedDict, TypeVar, final

_F = TypeVar("_F", bound=Callable[..., Any])
_State = Literal["closed", "open", "half_open", "forced_open"]
# A call's classifier (C17): "success", "failure", "cancelled", or None for the rule.
_Classify = Callable[[BaseException], str | None]
_ClassifyOk = Callable[[Any], str | None]
_Matchers = type[BaseException] | Callable[[BaseException], object] | tuple[
    type[BaseException] | Callable[[BaseException], object], ...
]
_Reason = Literal["open", "probe_budget", "forced_open", "deadline_expired"]
_Kind = Literal["stale", "degraded", "error"]
_Outcome = Literal["success", "failure", "cancelled"]

__all__ = [
    "Bank",
    "ManualClock",
    "Decision",
    "Dependency",
    "Fallback",
    "BreakerError",
    "ConfigError",
    "UnknownDependency",
    "TenantRequired",
    "InvalidTenant",
    "DependencyUnavailable",
    "DeadlineExpired",
    "OutcomeAlreadyRecorded",
    "check_profile",
    "profile_advice",
    "_Unavailable",
    "_after_fork_in_child",
]


class BreakerError(Exception):
    """Base class of every error raised by breakerbank."""

class ConfigError(BreakerError, ValueError):
    problems: list[str] | None

class UnknownDependency(BreakerError, KeyError):
    dependency: str | None

class TenantRequired(BreakerError, ValueError):
    dependency: str | None

class InvalidTenant(BreakerError, ValueError):
    dependency: str | None

class DependencyUnavailable(BreakerError):
    dependency: str | None
    partition: str | None
    code: str | None
    retry_after: float | None

@final
class _Unavailable:
    """Marks the arguments of a DependencyUnavailable breakerbank raised (its message and attributes are made when read)."""

class DeadlineExpired(BreakerError):
    dependency: str | None
    partition: str | None

class OutcomeAlreadyRecorded(BreakerError, RuntimeError):
    dependency: str | None

class _Inspection(TypedDict):
    """One breaker as `Dependency.inspect` read it (C18)."""

    state: _State
    consecutive_failures: int
    half_open_successes: int
    probes_in_flight: int
    retrips: int
    since: float
    retry_after: float | None
    window_calls: int
    window_failures: int

class _Backoff(TypedDict):
    """A dependency's backoff (C6): the factor per re-trip and the cap, in seconds."""

    multiplier: float
    max: float

class _Recovery(TypedDict):
    """How long a dependency's outages last (C21), in seconds."""

    typical: float
    worst: float

class _Slo(TypedDict):
    """What a dependency promises (C21), in seconds."""

    latency: float | None
    recovery: _Recovery | None

@final
class ManualClock:
    def __new__(cls) -> ManualClock: ...
    def advance(self, seconds: float) -> None: ...
    def now(self) -> float: ...

@final
class Fallback:
    def __new__(cls, kind: _Kind, code: str | None = None) -> Fallback: ...
    @property
    def kind(self) -> _Kind: ...
    @property
    def code(self) -> str | None: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Decision:
    @property
    def admitted(self) -> bool: ...
    @property
    def probe(self) -> bool: ...
    @property
    def reason(self) -> _Reason | None: ...
    @property
    def fallback(self) -> Fallback | None: ...
    @property
    def retry_after(self) -> float | None: ...
    @property
    def outcome(self) -> _Outcome | None: ...
    def success(self) -> None: ...
    def failure(self) -> None: ...
    def cancelled(self) -> None: ...
    def finish(self, exc: BaseException | None = None) -> _Outcome: ...
    def serve_fallback(
        self,
        fallback: Callable[..., Any] | None = None,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        cache_key: str | None = None,
    ) -> Any: ...
    def _returned(self, value: object, cache_key: str | None = None) -> _Outcome: ...
    def __enter__(self) -> Decision: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> bool: ...
    def __aenter__(self) -> Awaitable[Decision]: ...
    def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> Awaitable[bool]: ...

@final
class Dependency:
    @property
    def name(self) -> str: ...
    @property
    def isolation(self) -> Literal["global", "tenant"]: ...
    @property
    def fallback(self) -> Fallback: ...
    @property
    def window(self) -> float | None: ...
    @property
    def open_duration(self) -> float: ...
    @property
    def backoff(self) -> _Backoff | None: ...
    @property
    def slo(self) -> _Slo | None: ...
    def breaker_of(self, tenant: str | None = None) -> str: ...
    def now(self) -> float: ...
    def admit(
        self,
        tenant: str | None = None,
        deadline: float | None = None,
        classify: _Classify | None = None,
    ) -> Decision: ...
    def classify(
        self,
        failure: _Matchers | None = None,
        success: _Matchers | None = None,
        cancelled: _Matchers | None = None,
        result: _ClassifyOk | None = None,
    ) -> None: ...
    def call(
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        tenant: str | None = None,
        deadline: float | None = None,
        fallback: Callable[..., Any] | None = None,
        cache_key: str | None = None,
        classify: _Classify | None = None,
        classify_ok: _ClassifyOk | None = None,
        **kwargs: Any,
    ) -> Any: ...
    def call_with(
        self,
        fn_: Callable[..., Any],
        /,
        args: tuple[Any, ...] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        tenant: str | None = None,
        deadline: float | None = None,
        fallback: Callable[..., Any] | None = None,
        cache_key: str | None = None,
        classify: _Classify | None = None,
        classify_ok: _ClassifyOk | None = None,
    ) -> Any: ...
    def acall(
        self,
        coro_fn: Callable[..., Awaitable[Any]],
        /,
        *args: Any,
        tenant: str | None = None,
        deadline: float | None = None,
        fallback: Callable[..., Any] | None = None,
        cache_key: str | None = None,
        classify: _Classify | None = None,
        classify_ok: _ClassifyOk | None = None,
        **kwargs: Any,
    ) -> Coroutine[Any, Any, Any]: ...
    def acall_with(
        self,
        coro_fn: Callable[..., Awaitable[Any]],
        /,
        args: tuple[Any, ...] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        tenant: str | None = None,
        deadline: float | None = None,
        fallback: Callable[..., Any] | None = None,
        cache_key: str | None = None,
        classify: _Classify | None = None,
        classify_ok: _ClassifyOk | None = None,
    ) -> Coroutine[Any, Any, Any]: ...
    def cache_put(self, key: str, value: object, *, tenant: str | None = None) -> None: ...
    def state(self, tenant: str | None = None) -> _State: ...
    def inspect(self, tenant: str | None = None) -> _Inspection: ...
    def reset(self, tenant: str | None = None) -> None: ...
    def force_open(self, tenant: str | None = None) -> None: ...
    def trip(self, tenant: str | None = None) -> None: ...
    def half_open(self, tenant: str | None = None) -> None: ...

@final
class Bank:
    @classmethod
    def from_yaml(cls, text: str, clock: ManualClock | None = None) -> Bank: ...
    @classmethod
    def from_dict(cls, profile: Mapping[str, Any], clock: ManualClock | None = None) -> Bank: ...
    @classmethod
    def load(cls, path: str | PathLike[str], clock: ManualClock | None = None) -> Bank: ...
    @property
    def dependencies(self) -> list[str]: ...
    def reload(self, text: str) -> None: ...
    @property
    def clock(self) -> ManualClock | None: ...
    def now(self) -> float: ...
    def __getitem__(self, key: str, /) -> Dependency: ...
    def __contains__(self, key: object, /) -> bool: ...
    def metrics(self) -> dict[str, dict[str, dict[str, Any]]]: ...
    def prometheus(self) -> str: ...
    def stuck(self) -> list[dict[str, Any]]: ...
    def on_event(self, listener: _F) -> _F: ...
    def flush_events(self, timeout: float = 5.0) -> bool: ...
    def events_dropped(self) -> int: ...
    def guard(
        self,
        dependency: str,
        tenant_arg: str | None = "tenant",
        fallback: Callable[..., Any] | None = None,
        cache_key: Callable[..., Any] | None = None,
        classify: _Classify | None = None,
        classify_ok: _ClassifyOk | None = None,
    ) -> Callable[[_F], _F]: ...

def check_profile(text: str, running: str | None = None) -> list[str]: ...

class _Advice(TypedDict):
    """One piece of C21's advice: the field to change, to what, and why."""

    dependency: str | None
    field: str
    kind: str
    suggested: float | None
    message: str

def profile_advice(text: str) -> list[_Advice]: ...
def _after_fork_in_child() -> None: ...
