"""asyncio support for ``Dependency.acall``'s native awaitable.

Only adaptation lives here (an async degraded fallback, an awaitable that is
not a coroutine); admission, the exception-to-outcome rule, slow calls and
fallback serving are the native ``Decision``'s, i.e. the core's.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ._native import Decision


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


async def _await(awaitable: Awaitable[Any]) -> Any:
    """Awaits an awaitable that is not a coroutine (the native awaitable
    resumes coroutines itself)."""
    return await awaitable
