"""What the HTTP client integrations share: one admission per request and
the outcome of its response or exception.

:mod:`breakerbank.httpx` and :mod:`breakerbank.requests` translate their
library's request and response into these calls; neither holds breaker
logic of its own. The rules, in one place:

- the tenant is a string (or ``None`` for a global dependency) or a
  callable of the request returning one;
- a response with a status of 500 or more is a failure, any other response
  a success (the core still counts a success of at least ``slow_call`` as a
  failure); an exception is counted by breakerbank's exception rule
  (:meth:`breakerbank.Decision.finish`): a connection error or a timeout is
  a failure, a cancellation is cancelled;
- ``classify(result)``, given, is asked first with the response or the
  exception and returns ``"success"``, ``"failure"``, ``"cancelled"``, or
  ``None`` for the rule above; if it raises, the call counts as cancelled
  and the exception propagates;
- a refused request gets the dependency's declared fallback: ``error``
  raises :class:`breakerbank.DependencyUnavailable`; ``degraded`` returns
  ``degraded(request)`` (a response of the library's own type), or raises
  ``DependencyUnavailable`` when no ``degraded`` was given; ``stale`` raises
  ``DependencyUnavailable``, as these integrations keep no responses.
  ``DependencyUnavailable`` carries ``retry_after``. The server is not
  contacted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Union

from ._native import Decision, Dependency

__all__ = ["Classify", "Gate", "Tenant"]

#: The tenant of a request: fixed, or a callable of the request.
Tenant = Union[str, None, Callable[[Any], Union[str, None]]]
#: ``classify(response_or_exception)``: an outcome, or None for the default rule.
Classify = Callable[[Any], Union[Literal["success", "failure", "cancelled"], None]]

_OUTCOMES = ("success", "failure", "cancelled")


class Gate:
    """One dependency's admission and recording rules for HTTP requests."""

    __slots__ = ("dependency", "tenant", "classify", "degraded")

    def __init__(
        self,
        dependency: Dependency,
        tenant: Tenant,
        classify: Classify | None,
        degraded: Callable[[Any], Any] | None,
    ) -> None:
        if not isinstance(dependency, Dependency):
            raise TypeError(
                f"expected a breakerbank.Dependency (bank[name]), got {type(dependency).__name__}"
            )
        if classify is not None and not callable(classify):
            raise TypeError("classify must be a callable of the response or exception")
        if degraded is not None and not callable(degraded):
            raise TypeError("degraded must be a callable of the request returning a response")
        self.dependency = dependency
        self.tenant = tenant
        self.classify = classify
        self.degraded = degraded

    def admit(self, request: Any) -> Decision:
        """One admission for `request` (TenantRequired and the like propagate)."""
        tenant = self.tenant(request) if callable(self.tenant) else self.tenant
        return self.dependency.admit(tenant=tenant)

    def refuse(self, d: Decision, request: Any) -> Any:
        """The declared fallback of a refused request, or raises (module docs)."""
        fallback = d.fallback
        if fallback is not None and fallback.kind == "stale":
            # No response is kept to serve: raise as entering the decision does.
            with d:
                pass
        return d.serve_fallback(self.degraded, (request,), None, None)

    def record(self, d: Decision, result: Any, status: int | None) -> None:
        """Records the outcome of a response (`status` given) or an exception,
        once: a second call for the same decision does nothing."""
        if d.outcome is not None:
            return
        outcome = None if self.classify is None else self._classified(d, result)
        if outcome is None:  # the default rule
            if status is None:
                d.finish(result)
            elif status >= 500:
                d.failure()
            else:
                d.success()
        elif outcome == "success":
            d.success()
        elif outcome == "failure":
            d.failure()
        else:
            d.cancelled()

    def _classified(self, d: Decision, result: Any) -> str | None:
        """What `classify` says of `result`; if it raises or answers nonsense,
        the call counts as cancelled and the error propagates."""
        assert self.classify is not None
        try:
            outcome = self.classify(result)
            if outcome is not None and outcome not in _OUTCOMES:
                raise ValueError(f"classify returned {outcome!r}: expected one of {', '.join(_OUTCOMES)} or None")
        except BaseException:
            d.cancelled()
            raise
        return outcome
