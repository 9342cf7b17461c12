"""``@bank.guard(...)``: run a function, sync or async, through a dependency."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ._native import Bank

F = TypeVar("F", bound=Callable[..., Any])

_NO_DEFAULT = object()


def _tenant_getter(
    fn: Callable[..., Any], tenant_arg: str | None, dependency: str, tenant_scoped: bool
) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    """How to find the tenant among a call's arguments, decided once."""
    if tenant_arg is None:
        if tenant_scoped:
            raise TypeError(
                f"@guard({dependency!r}): the dependency is tenant-scoped, "
                "so tenant_arg must name the parameter holding the tenant"
            )
        return lambda args, kwargs: None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        params = []
    for index, p in enumerate(params):
        if p.name != tenant_arg or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = _NO_DEFAULT if p.default is p.empty else p.default
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        keyword = p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)

        def get(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if positional and index < len(args):
                return args[index]
            if keyword and tenant_arg in kwargs:
                return kwargs[tenant_arg]
            return None if default is _NO_DEFAULT else default

        return get
    if any(p.kind is p.VAR_KEYWORD for p in params) or not params:
        return lambda args, kwargs: kwargs.get(tenant_arg)
    if tenant_scoped:
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(
            f"@guard({dependency!r}): {name} has no parameter {tenant_arg!r} "
            "to read the tenant from (set tenant_arg=...)"
        )
    return lambda args, kwargs: None


def _as_key(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)


def guard(
    bank: Bank,
    dependency: str,
    tenant_arg: str | None = "tenant",
    fallback: Callable[..., Any] | None = None,
    cache_key: Callable[..., Any] | None = None,
    classify: Callable[[BaseException], str | None] | None = None,
    classify_ok: Callable[[Any], str | None] | None = None,
) -> Callable[[F], F]:
    """The decorator behind ``Bank.guard`` (see its documentation)."""
    dep = bank[dependency]  # UnknownDependency now, not at the first call
    if fallback is not None and not callable(fallback):
        raise TypeError(f"fallback must be callable or None, got {type(fallback).__name__}")
    if fallback is not None and dep.fallback.kind != "degraded":
        # As Dependency.call refuses it (C17), but at decoration.
        raise TypeError(
            f"fallback= is for a `degraded` fallback, and `{dependency}` declares "
            f"`{dep.fallback.kind}`: nothing would run it; leave fallback= out"
        )
    if classify_ok is not None and not callable(classify_ok):
        raise TypeError(
            "classify_ok must be a callable of the returned value returning "
            f'"success", "failure", "cancelled" or None, got {type(classify_ok).__name__}'
        )
    if classify is not None and not callable(classify):
        raise TypeError(
            "classify must be a callable of the exception returning "
            f'"success", "failure", "cancelled" or None, got {type(classify).__name__}'
        )
    if cache_key is not None and not callable(cache_key):
        raise TypeError(
            "cache_key must be a callable of the call's arguments returning the key, "
            f"got {type(cache_key).__name__}"
        )
    tenant_scoped = dep.isolation == "tenant"

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"@guard({dependency!r}) decorates a callable, got {type(fn).__name__}")
        get_tenant = _tenant_getter(fn, tenant_arg, dependency, tenant_scoped)

        def options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | None, str | None]:
            tenant = get_tenant(args, kwargs)
            if tenant is not None and not isinstance(tenant, str):
                # As Dependency.call: str(5) or str(b"acme") would silently
                # name another tenant's partition (C9).
                raise TypeError(
                    f"tenant must be a str or None, got {type(tenant).__name__} "
                    f"(argument {tenant_arg!r} of @guard({dependency!r}))"
                )
            key = None if cache_key is None else _as_key(cache_key(*args, **kwargs))
            return tenant, key

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                tenant, key = options(args, kwargs)
                return await dep.acall_with(
                    fn,
                    args,
                    kwargs,
                    tenant=tenant,
                    fallback=fallback,
                    cache_key=key,
                    classify=classify,
                    classify_ok=classify_ok,
                )

            wrapper: Callable[..., Any] = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                tenant, key = options(args, kwargs)
                return dep.call_with(
                    fn,
                    args,
                    kwargs,
                    tenant=tenant,
                    fallback=fallback,
                    cache_key=key,
                    classify=classify,
                    classify_ok=classify_ok,
                )

            wrapper = sync_wrapper
        wrapper.__breakerbank_dependency__ = dep  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
