"""asyncio support: the coroutine behind ``Dependency.acall``.

Only adaptation lives here (awaiting the call and an async degraded
fallback); admission, the exception-to-outcome rule, slow calls and
fallback serving are the native ``Decision``'s, i.e. the core's.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ._native import Decision, Dependency


async def _serve(
    d: Decision,
    fallback: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    cache_key: str | None,
) -> Any:
    declared = d.fallback
    if declared is None or declared.kind != "degraded":
        return d.serve_fallback(None, args, dict(kwargs) if kwargs else None, cache_key)
    # An async degraded behaviour is awaited here, then handed to the core as
    # a plain value (or as the exception it raised) so the core counts it.
    try:
        value = fallback(*args, **(kwargs or {}))
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:  # noqa: BLE001 - becomes DependencyUnavailable's cause
        failure = exc

        def degraded_failed() -> NoReturn:
            raise failure

        return d.serve_fallback(degraded_failed, (), None, cache_key)
    return d.serve_fallback(lambda: value, (), None, cache_key)


async def _acall(
    dep: Dependency,
    fn: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    tenant: str | None,
    deadline: float | None,
    fallback: Callable[..., Any] | None,
    cache_key: str | None,
    classify: Callable[[BaseException], str | None] | None,
) -> Any:
    d = dep.admit(tenant, deadline, classify)
    if not d.admitted:
        if fallback is None:  # nothing to await: served (or raised) as dep.call would
            return d.serve_fallback(None, args, dict(kwargs) if kwargs else None, cache_key)
        return await _serve(d, fallback, args, kwargs, cache_key)
    try:
        awaitable = fn(*args, **kwargs) if kwargs else fn(*args)
        # A coroutine is the common case; anything else asks inspect.
        if type(awaitable) is not CoroutineType and not inspect.isawaitable(awaitable):
            d.cancelled()
            raise TypeError(
                f"Dependency.acall needs a coroutine function; "
                f"{getattr(fn, '__qualname__', fn)!r} returned {type(awaitable).__name__}"
            )
        result = await awaitable
    except BaseException as exc:
        if d.outcome is None:
            d.finish(exc)
        raise
    d._returned(result, cache_key)
    return result


def acall_with(
    dep: Dependency,
    fn: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    tenant: str | None,
    deadline: float | None,
    fallback: Callable[..., Any] | None,
    cache_key: str | None,
    classify: Callable[[BaseException], str | None] | None = None,
) -> Awaitable[Any]:
    """The coroutine of ``dep.acall(fn, *args, ...)`` (called by the native side,
    which has checked ``classify``)."""
    if not callable(fn):
        raise TypeError(f"Dependency.acall needs a callable, got {type(fn).__name__}")
    if fallback is not None and not callable(fallback):
        raise TypeError(f"fallback must be callable or None, got {type(fallback).__name__}")
    return _acall(dep, fn, args, kwargs, tenant, deadline, fallback, cache_key, classify)
