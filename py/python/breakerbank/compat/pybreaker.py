"""pybreaker's public API over breakerbank.

``import breakerbank.compat.pybreaker as pybreaker`` runs code written for
pybreaker (its README's examples unchanged). Each ``CircuitBreaker`` is one
global dependency of a breakerbank bank of its own; this module translates
and holds no breaker logic: admission, counting and transitions are the
core's (C5, C7, C8), the counters come from ``inspect`` (C18), ``open()`` and
``half_open()`` are operator transitions (C19), ``close()`` is ``reset``
(C11), the setters reload the bank's profile (C20) and ``exclude`` is a
classifier (C17). Listeners' ``before_call``, ``success`` and ``failure``
are called by this module around the call; ``state_change`` from
breakerbank's events.

Deliberate differences from pybreaker:

- **A declared fallback.** An open breaker refuses at once with
  ``CircuitBreakerError`` (the dependency's fallback is ``error``, code
  ``CIRCUIT_OPEN``), as pybreaker does.
- **No call serialisation.** pybreaker runs every call under one lock;
  breakerbank admits calls concurrently. Half-open admits one probe at a
  time (``success_threshold`` of them in turn close it): a concurrent
  caller during a probe is refused with ``CircuitBreakerError``.
- **Interrupts are cancelled, not failures.** ``KeyboardInterrupt``,
  ``SystemExit``, ``GeneratorExit`` (a generator closed early) and
  ``asyncio.CancelledError`` count as neither success nor failure (the
  caller gave up, not the dependency).
- **Events are delivered off the call path.** ``state_change`` is called
  from breakerbank's event thread shortly after the transition, not inside
  the call that caused it.
- **``call_async`` is asyncio**, not Tornado: it returns a coroutine.
- **State lives in process memory.** ``CircuitRedisStorage`` raises
  ``NotImplementedError``: fleets aggregate through metrics instead (see the
  README's alerting section). ``CircuitMemoryStorage`` is accepted; its
  initial state is applied to the breaker.
- ``reset_timeout`` is kept to the millisecond.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from .. import Bank

__all__ = [
    "STATE_CLOSED",
    "STATE_HALF_OPEN",
    "STATE_OPEN",
    "CircuitBreaker",
    "CircuitBreakerError",
    "CircuitBreakerListener",
    "CircuitBreakerState",
    "CircuitBreakerStorage",
    "CircuitClosedState",
    "CircuitHalfOpenState",
    "CircuitMemoryStorage",
    "CircuitOpenState",
    "CircuitRedisStorage",
]

T = TypeVar("T")

STATE_CLOSED = "closed"
STATE_OPEN = "open"
STATE_HALF_OPEN = "half-open"

# breakerbank's state names → pybreaker's (a forced open reads open).
_STATE_NAMES = {
    "closed": STATE_CLOSED,
    "open": STATE_OPEN,
    "half_open": STATE_HALF_OPEN,
    "forced_open": STATE_OPEN,
}

_DEPENDENCY = "pybreaker"
_OPEN = "Timeout not elapsed yet, circuit breaker still open"
_TRIPPED = "Failures threshold reached, circuit breaker opened"
_PROBE_FAILED = "Trial call failed, circuit breaker opened"


class CircuitBreakerError(Exception):
    """Raised instead of calling the operation while the circuit is open,
    and by the failing call that opens it (``throw_new_error_on_trip``)."""


class CircuitBreakerListener:
    """Subclass and override to be told of a breaker's calls and changes."""

    def before_call(self, cb: CircuitBreaker, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Called before the breaker ``cb`` calls ``func`` (once admitted)."""

    def failure(self, cb: CircuitBreaker, exc: BaseException) -> None:
        """Called when a call through ``cb`` raised an error counted as a failure."""

    def success(self, cb: CircuitBreaker) -> None:
        """Called when a call through ``cb`` succeeded (or raised an excluded error)."""

    def state_change(
        self, cb: CircuitBreaker, old_state: CircuitBreakerState | None, new_state: CircuitBreakerState
    ) -> None:
        """Called when ``cb`` changes state (from breakerbank's event thread)."""


class CircuitBreakerState:
    """A state as listeners and ``cb.state`` see it: ``.name`` is one of
    ``"closed"``, ``"open"``, ``"half-open"``."""

    def __init__(self, cb: CircuitBreaker, name: str) -> None:
        self._breaker = cb
        self._name = name

    @property
    def name(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"``."""
        return self._name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r}>"


class CircuitClosedState(CircuitBreakerState):
    """The closed state: calls run; consecutive failures are counted."""

    def __init__(self, cb: CircuitBreaker, prev_state: CircuitBreakerState | None = None, notify: bool = False) -> None:
        super().__init__(cb, STATE_CLOSED)


class CircuitOpenState(CircuitBreakerState):
    """The open state: calls are refused with ``CircuitBreakerError``."""

    def __init__(self, cb: CircuitBreaker, prev_state: CircuitBreakerState | None = None, notify: bool = False) -> None:
        super().__init__(cb, STATE_OPEN)


class CircuitHalfOpenState(CircuitBreakerState):
    """The half-open state: trial calls decide between closed and open."""

    def __init__(self, cb: CircuitBreaker, prev_state: CircuitBreakerState | None = None, notify: bool = False) -> None:
        super().__init__(cb, STATE_HALF_OPEN)


_STATE_CLASSES: dict[str, Callable[[CircuitBreaker], CircuitBreakerState]] = {
    STATE_CLOSED: CircuitClosedState,
    STATE_OPEN: CircuitOpenState,
    STATE_HALF_OPEN: CircuitHalfOpenState,
}


class CircuitBreakerStorage:
    """pybreaker's storage interface. Only ``CircuitMemoryStorage`` is
    supported: the state lives in the breakerbank core."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        """The storage's name."""
        return self._name


class CircuitMemoryStorage(CircuitBreakerStorage):
    """In-process storage; ``state`` is the breaker's initial state."""

    def __init__(self, state: str) -> None:
        super().__init__("memory")
        if state not in _STATE_CLASSES:
            raise ValueError(f"Unknown state {state!r}, valid states: {', '.join(_STATE_CLASSES)}")
        self._state = state

    @property
    def state(self) -> str:
        """The initial state given."""
        return self._state


class CircuitRedisStorage(CircuitBreakerStorage):
    """Not supported: breakerbank keeps each breaker's state in process."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "breakerbank.compat.pybreaker does not support CircuitRedisStorage: breaker state "
            "lives in the process (aggregate a fleet through breakerbank's Prometheus metrics)"
        )


def _profile(fail_max: int, reset_timeout: float, success_threshold: int) -> str:
    for name, value in (("fail_max", fail_max), ("success_threshold", success_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer of at least 1, not {value!r}")
    if isinstance(reset_timeout, bool) or not isinstance(reset_timeout, (int, float)) or not reset_timeout > 0:
        raise ValueError(f"reset_timeout must be a positive number of seconds, not {reset_timeout!r}")
    millis = max(1, round(reset_timeout * 1000))
    return (
        "dependencies:\n"
        f"  {_DEPENDENCY}:\n"
        "    isolation: global\n"
        f"    trip: {{consecutive_failures: {fail_max}}}\n"
        f"    open_duration: {millis}ms\n"
        f"    half_open: {{probe_budget: 1, success_threshold: {success_threshold}}}\n"
        "    fallback: {kind: error, code: CIRCUIT_OPEN}\n"
        # pybreaker has no stuck alert: a bound well past the open period.
        f"    recovery_bound: {max(3_600_000, 10 * millis)}ms\n"
    )


class CircuitBreaker:
    """A circuit breaker with pybreaker's interface, run by breakerbank.

    >>> import breakerbank.compat.pybreaker as pybreaker
    >>> db_breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=60)
    >>> db_breaker.call(lambda: "row")
    'row'
    >>> db_breaker.current_state
    'closed'
    """

    def __init__(
        self,
        fail_max: int = 5,
        reset_timeout: float = 60,
        success_threshold: int = 1,
        exclude: Iterable[type[BaseException] | Callable[[BaseException], bool]] | None = None,
        listeners: Sequence[CircuitBreakerListener] | None = None,
        state_storage: CircuitBreakerStorage | None = None,
        name: str | None = None,
        throw_new_error_on_trip: bool = True,
    ) -> None:
        if state_storage is not None and not isinstance(state_storage, CircuitMemoryStorage):
            raise NotImplementedError(
                f"breakerbank.compat.pybreaker supports CircuitMemoryStorage only, not "
                f"{type(state_storage).__name__}"
            )
        self._settings: dict[str, Any] = {
            "fail_max": fail_max,
            "reset_timeout": reset_timeout,
            "success_threshold": success_threshold,
        }
        self._bank = Bank.from_yaml(_profile(**self._settings))
        self._dep = self._bank[_DEPENDENCY]
        self._excluded: list[type[BaseException] | Callable[[BaseException], bool]] = []
        self._listeners: list[CircuitBreakerListener] = list(listeners or [])
        self._name = name
        self._throw_new_error_on_trip = throw_new_error_on_trip
        # A weak reference: the bank keeps its listener alive, and the
        # breaker keeps the bank.
        me = weakref.ref(self)

        def on_event(event: dict[str, Any]) -> None:
            cb = me()
            if cb is not None:
                cb._on_event(event)

        self._bank.on_event(on_event)
        self.add_excluded_exceptions(*(exclude or ()))
        initial = state_storage.state if state_storage is not None else STATE_CLOSED
        if initial == STATE_OPEN:
            self.open()
        elif initial == STATE_HALF_OPEN:
            self.half_open()

    # -- configuration (C20: a reload of the breaker's own bank) ----------

    def _reconfigure(self, **changes: Any) -> None:
        settings: dict[str, Any] = {**self._settings, **changes}
        self._bank.reload(_profile(**settings))
        self._settings = settings

    @property
    def fail_max(self) -> int:
        """Consecutive failures that open the circuit."""
        return int(self._settings["fail_max"])

    @fail_max.setter
    def fail_max(self, number: int) -> None:
        self._reconfigure(fail_max=number)

    @property
    def reset_timeout(self) -> float:
        """Seconds the circuit stays open before a trial call."""
        return float(self._settings["reset_timeout"])

    @reset_timeout.setter
    def reset_timeout(self, timeout: float) -> None:
        self._reconfigure(reset_timeout=timeout)

    @property
    def success_threshold(self) -> int:
        """Successful trial calls that close a half-open circuit."""
        return int(self._settings["success_threshold"])

    @success_threshold.setter
    def success_threshold(self, threshold: int) -> None:
        self._reconfigure(success_threshold=threshold)

    @property
    def name(self) -> str | None:
        """The breaker's name (for logs)."""
        return self._name

    @name.setter
    def name(self, name: str) -> None:
        self._name = name

    @property
    def bank(self) -> Bank:
        """The breakerbank bank behind this breaker (metrics, events)."""
        return self._bank

    # -- state (C18 reads, C11/C19 changes) ---------------------------------

    @property
    def current_state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"``."""
        return _STATE_NAMES[self._dep.state()]

    @property
    def state(self) -> CircuitBreakerState:
        """The current state as an object with ``.name``."""
        return self._state_object(self.current_state)

    @state.setter
    def state(self, state_str: str) -> None:
        actions = {STATE_CLOSED: self.close, STATE_OPEN: self.open, STATE_HALF_OPEN: self.half_open}
        try:
            action = actions[state_str]
        except KeyError:
            raise ValueError(f"Unknown state {state_str!r}, valid states: {', '.join(actions)}") from None
        action()

    @property
    def fail_counter(self) -> int:
        """Consecutive failures counted while closed."""
        return int(self._dep.inspect()["consecutive_failures"])

    @property
    def success_counter(self) -> int:
        """Successful trial calls counted while half-open."""
        return int(self._dep.inspect()["half_open_successes"])

    def open(self) -> bool:
        """Opens the circuit until ``reset_timeout`` passes (a trip: it ends by
        itself). Returns ``throw_new_error_on_trip``."""
        self._dep.trip()
        return self._throw_new_error_on_trip

    def half_open(self) -> None:
        """Starts a trial now: the next call decides."""
        self._dep.half_open()

    def close(self) -> None:
        """Closes the circuit, counters cleared."""
        self._dep.reset()

    def _state_object(self, name: str) -> CircuitBreakerState:
        return _STATE_CLASSES[name](self)

    # -- exclusions (C17) ---------------------------------------------------

    @property
    def excluded_exceptions(self) -> tuple[type[BaseException] | Callable[[BaseException], bool], ...]:
        """Exception types and predicates that do not count as failures."""
        return tuple(self._excluded)

    def _exclusions_changed(self) -> None:
        # C17: an excluded exception is an expected answer, a success, as
        # in pybreaker; the dependency's rule says so to the core.
        if self._excluded:
            self._dep.classify(success=tuple(self._excluded))
        else:
            self._dep.classify()

    def add_excluded_exception(self, exception: type[BaseException] | Callable[[BaseException], bool]) -> None:
        """Stops counting ``exception`` (a type or a predicate) as a failure."""
        self._excluded.append(exception)
        self._exclusions_changed()

    def add_excluded_exceptions(self, *exceptions: type[BaseException] | Callable[[BaseException], bool]) -> None:
        """``add_excluded_exception`` for each."""
        for exc in exceptions:
            self.add_excluded_exception(exc)

    def remove_excluded_exception(self, exception: type[BaseException] | Callable[[BaseException], bool]) -> None:
        """Counts ``exception`` as a failure again."""
        self._excluded.remove(exception)
        self._exclusions_changed()

    def is_system_error(self, exception: BaseException) -> bool:
        """Whether ``exception`` counts against the breaker (not excluded)."""
        for exclusion in self._excluded:
            if isinstance(exclusion, type):
                if isinstance(exception, exclusion):
                    return False
            elif callable(exclusion) and exclusion(exception):
                return False
        return True

    # -- listeners ----------------------------------------------------------

    @property
    def listeners(self) -> tuple[CircuitBreakerListener, ...]:
        """The registered listeners."""
        return tuple(self._listeners)

    def add_listener(self, listener: CircuitBreakerListener) -> None:
        """Registers ``listener``."""
        self._listeners.append(listener)

    def add_listeners(self, *listeners: CircuitBreakerListener) -> None:
        """Registers each listener."""
        for listener in listeners:
            self.add_listener(listener)

    def remove_listener(self, listener: CircuitBreakerListener) -> None:
        """Unregisters ``listener``."""
        self._listeners.remove(listener)

    def _on_event(self, event: dict[str, Any]) -> None:
        old, new = event.get("from"), event.get("to")
        if old is None or new is None:
            return
        old_name, new_name = _STATE_NAMES[old], _STATE_NAMES[new]
        if old_name == new_name:
            return
        for listener in tuple(self._listeners):
            listener.state_change(self, self._state_object(old_name), self._state_object(new_name))

    # -- calls --------------------------------------------------------------

    def _admit(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        d = self._dep.admit()
        if not d.admitted:
            raise CircuitBreakerError(_OPEN)
        try:
            for listener in tuple(self._listeners):
                listener.before_call(self, func, *args, **kwargs)
        except BaseException:
            d.cancelled()
            raise
        return d

    def _succeeded(self, d: Any) -> None:
        d.success()
        for listener in tuple(self._listeners):
            listener.success(self)

    def _failed(self, d: Any, exc: BaseException) -> None:
        """Records a raised exception; raises ``CircuitBreakerError`` in its
        place when it opened the circuit and ``throw_new_error_on_trip``."""
        outcome = d.finish(exc)
        if outcome == "success":
            for listener in tuple(self._listeners):
                listener.success(self)
            return
        if outcome != "failure":
            return
        for listener in tuple(self._listeners):
            listener.failure(self, exc)
        if self._throw_new_error_on_trip and self._dep.state() == "open":
            raise CircuitBreakerError(_PROBE_FAILED if d.probe else _TRIPPED) from exc

    def call(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Calls ``func(*args, **kwargs)`` through the breaker. A generator
        function's outcome is recorded when the generator finishes."""
        d = self._admit(func, args, kwargs)
        try:
            ret = func(*args, **kwargs)
        except BaseException as exc:
            self._failed(d, exc)
            raise
        if isinstance(ret, types.GeneratorType):
            return self._generator(d, ret)  # type: ignore[return-value]
        self._succeeded(d)
        return ret

    def _generator(self, d: Any, gen: types.GeneratorType) -> Iterator[Any]:
        try:
            result = yield from gen
        except BaseException as exc:
            self._failed(d, exc)
            raise
        self._succeeded(d)
        return result

    async def call_async(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Awaits ``func(*args, **kwargs)`` through the breaker (asyncio)."""
        d = self._admit(func, args, kwargs)
        try:
            ret = await func(*args, **kwargs)
        except BaseException as exc:
            self._failed(d, exc)
            raise
        self._succeeded(d)
        return ret

    @contextlib.contextmanager
    def calling(self) -> Iterator[None]:
        """The breaker around a ``with`` block."""
        d = self._admit(self.calling, (), {})
        try:
            yield
        except BaseException as exc:
            self._failed(d, exc)
            raise
        self._succeeded(d)

    def __call__(self, *call_args: Any, **call_kwargs: bool) -> Callable[..., Any]:
        """Decorates a function, coroutine function or generator function."""
        call_async = call_kwargs.pop("__pybreaker_call_async", False)

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            if call_async or inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    return await self.call_async(func, *args, **kwargs)

                return async_wrapper

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return self.call(func, *args, **kwargs)

            return wrapper

        if call_args:
            return decorate(*call_args)
        return decorate
