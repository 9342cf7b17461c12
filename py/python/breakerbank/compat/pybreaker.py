"""pybreaker's public API over breakerbank.

``import breakerbank.compat.pybreaker as pybreaker`` runs code written for
pybreaker: its README's examples unchanged, and pybreaker's own test module
(``py/tests/pybreaker_suite``) but for the tests listed below. Each
``CircuitBreaker`` is one global dependency of a breakerbank bank of its
own; this module translates and holds no breaker logic: admission, counting
to the trip and transitions are the core's (C5, C7, C8), ``success_counter``
comes from ``inspect`` (C18), ``open()`` and ``half_open()`` are operator
transitions (C19), ``close()`` is ``reset`` (C11), the setters reload the
bank's profile (C20) and ``exclude`` is a classifier (C17). Listeners'
``before_call``, ``success`` and ``failure`` are called by this module
around the call.

What is kept here for pybreaker's API, as translation:

- **``fail_counter``** is pybreaker's count, kept in the breaker's
  ``CircuitMemoryStorage``: one more for each failure (in any state), zero
  after a success or when the circuit closes. It reads ``fail_max`` once
  the failures opened the circuit (the core's own count starts again at
  each trip) and counts a failed trial call on top. The core decides the
  trip from its own count, so a storage's count given at construction is
  reported, not counted toward the trip.
- **``state_change``** is called when the breaker sees the core's state
  differ from the last one it reported: after the call or the ``open()``,
  ``half_open()``, ``close()`` that changed it, before that returns
  (open to half-open when the trial call is admitted), and on breakerbank's
  event thread for a change made on ``cb.bank`` directly. The state objects
  are pybreaker's: ``_create_new_state`` builds one, and one built with
  ``notify`` tells the listeners.
- **``CircuitMemoryStorage``** keeps pybreaker's storage interface:
  ``state`` (the initial state, then the last one reported),
  ``counter``/``increment_counter``/``reset_counter`` (``fail_counter``),
  ``opened_at`` (when the breaker was last seen to open; the core times the
  open period), and ``success_counter`` with its methods, which the breaker
  does not use (it reads half-open successes from the core).

Deliberate differences from pybreaker:

- **A declared fallback.** An open breaker refuses at once with
  ``CircuitBreakerError`` (the dependency's fallback is ``error``, code
  ``CIRCUIT_OPEN``), as pybreaker does.
- **No call serialisation.** pybreaker runs every call under one lock;
  breakerbank admits calls concurrently (this module's lock covers only its
  counter and reporting). Half-open admits one probe at a time
  (``success_threshold`` of them in turn close it): a concurrent caller
  during a probe is refused with ``CircuitBreakerError``.
- **Interrupts are cancelled, not failures.** ``KeyboardInterrupt``,
  ``SystemExit``, ``GeneratorExit`` (a generator closed early) and
  ``asyncio.CancelledError`` count as neither success nor failure (the
  caller gave up, not the dependency).
- **``call_async`` is asyncio**, not Tornado: it returns a coroutine, which
  Tornado can also await; the module needs no Tornado.
- **State lives in process memory.** ``CircuitRedisStorage`` raises
  ``NotImplementedError``: fleets aggregate through metrics instead (see the
  README's alerting section).
- **``fail_max`` is at most 1023**, the largest ``trip.consecutive_failures``
  (a field of the breaker's state word).
- ``reset_timeout`` is kept to the millisecond, and the open period ends
  on the core's coarse clock: up to a tick (1-4 ms) late, never early.

pybreaker's own tests that fail here (``py/tests/pybreaker_suite``: 50 of
its 56 runnable tests pass; its Redis storage tests are not applicable):

- ``CircuitBreakerThreadsTestCase::test_fail_thread_safety``,
  ``test_success_thread_safety``, ``test_half_open_thread_safety``,
  ``test_fail_max_thread_safety``: their ``setUp`` builds
  ``CircuitBreaker(fail_max=3000)``, refused (``fail_max`` is at most 1023).
- ``CircuitBreakerTestCase::test_no_tornado_raises``: expects an
  ``ImportError`` when Tornado is missing; ``call_async`` is asyncio, so
  there is no Tornado to be missing.
- ``CircuitBreakerContextManagerTestCase::test_calling`` (passes or fails
  by how long a sleep overshoots): it sleeps exactly ``reset_timeout``
  (10 ms) and expects a trial call, but the open period ends up to a tick
  late.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
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
# The range of the profile's trip.consecutive_failures (a field of the
# breaker's state word): fail_max translates to it.
_FAIL_MAX_LIMIT = 1023
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
        """Called when ``cb`` is seen to change state, before the call or action that changed it returns."""


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


def _announce(state: CircuitBreakerState, prev_state: CircuitBreakerState | None, notify: bool) -> None:
    # pybreaker's state objects tell the listeners of the change they are
    # (``notify``); a state object built for a breaker's initial state does not.
    if notify:
        cb = state._breaker
        for listener in cb.listeners:
            listener.state_change(cb, prev_state, state)


class CircuitClosedState(CircuitBreakerState):
    """The closed state: calls run; consecutive failures are counted."""

    def __init__(self, cb: CircuitBreaker, prev_state: CircuitBreakerState | None = None, notify: bool = False) -> None:
        super().__init__(cb, STATE_CLOSED)
        if notify:
            # pybreaker's failure count starts again when the circuit closes.
            cb._state_storage.reset_counter()
        _announce(self, prev_state, notify)


class CircuitOpenState(CircuitBreakerState):
    """The open state: calls are refused with ``CircuitBreakerError``."""

    def __init__(self, cb: CircuitBreaker, prev_state: CircuitBreakerState | None = None, notify: bool = False) -> None:
        super().__init__(cb, STATE_OPEN)
        if notify:
            cb._state_storage.opened_at = datetime.now(timezone.utc)
        _announce(self, prev_state, notify)


class CircuitHalfOpenState(CircuitBreakerState):
    """The half-open state: trial calls decide between closed and open."""

    def __init__(self, cb: CircuitBreaker, prev_state: CircuitBreakerState | None = None, notify: bool = False) -> None:
        super().__init__(cb, STATE_HALF_OPEN)
        _announce(self, prev_state, notify)


_STATE_NAMES_VALID = (STATE_CLOSED, STATE_OPEN, STATE_HALF_OPEN)


def _check_state(state: str) -> None:
    if state not in _STATE_NAMES_VALID:
        raise ValueError(f"Unknown state {state!r}, valid states: {', '.join(_STATE_NAMES_VALID)}")


class CircuitBreakerStorage:
    """pybreaker's storage interface. Only ``CircuitMemoryStorage`` is
    supported: the breaker's state lives in the breakerbank core."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        """The storage's name."""
        return self._name


class CircuitMemoryStorage(CircuitBreakerStorage):
    """In-process storage: ``state`` is the breaker's initial state and then
    the last state the breaker reported; ``counter`` is pybreaker's failure
    count, kept here for pybreaker's API (``fail_counter``); ``opened_at``
    is when the breaker was last seen to open.

    The core decides: it counts the failures that trip the circuit and times
    the open period itself. ``success_counter`` and its methods are kept for
    code that uses pybreaker's storage interface; the breaker reports its
    half-open successes from the core (``CircuitBreaker.success_counter``).
    """

    def __init__(self, state: str) -> None:
        super().__init__("memory")
        _check_state(state)
        self._state = state
        self._fail_counter = 0
        self._success_counter = 0
        self._opened_at: datetime | None = None

    @property
    def state(self) -> str:
        """The initial state given, then the breaker's last reported state."""
        return self._state

    @state.setter
    def state(self, state: str) -> None:
        _check_state(state)
        self._state = state

    def increment_counter(self) -> None:
        """Adds one to the failure count."""
        self._fail_counter += 1

    def reset_counter(self) -> None:
        """Sets the failure count to zero."""
        self._fail_counter = 0

    def increment_success_counter(self) -> None:
        """Adds one to the success count."""
        self._success_counter += 1

    def reset_success_counter(self) -> None:
        """Sets the success count to zero."""
        self._success_counter = 0

    @property
    def counter(self) -> int:
        """The failure count."""
        return self._fail_counter

    @property
    def success_counter(self) -> int:
        """The success count."""
        return self._success_counter

    @property
    def opened_at(self) -> datetime | None:
        """When the breaker was last seen to open (UTC), or ``None``."""
        return self._opened_at

    @opened_at.setter
    def opened_at(self, when: datetime) -> None:
        self._opened_at = when


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
    if fail_max > _FAIL_MAX_LIMIT:
        # Said in pybreaker's words; the profile would name its own field.
        raise ValueError(
            f"fail_max must be at most {_FAIL_MAX_LIMIT} (breakerbank's trip.consecutive_failures), not {fail_max}"
        )
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
        # Keeps pybreaker's failure count and the last reported state; the
        # storage's counter as given is kept (pybreaker does not reset it).
        self._state_storage: CircuitMemoryStorage = (
            state_storage if state_storage is not None else CircuitMemoryStorage(STATE_CLOSED)
        )
        # Serialises the reporting (the counter, the state objects and the
        # listeners' state_change), not the calls.
        self._lock = threading.RLock()
        self._excluded: list[type[BaseException] | Callable[[BaseException], bool]] = []
        self._listeners: list[CircuitBreakerListener] = list(listeners or [])
        self._name = name
        self._throw_new_error_on_trip = throw_new_error_on_trip
        # A weak reference: the bank keeps its listener alive, and the
        # breaker keeps the bank.
        me = weakref.ref(self)

        def on_event(event: dict[str, Any]) -> None:
            # A change made on the bank itself (not through this breaker)
            # is reported when its event arrives.
            cb = me()
            if cb is not None:
                cb._sync_state()

        self.add_excluded_exceptions(*(exclude or ()))
        initial = self._state_storage.state
        if initial == STATE_OPEN:
            self._dep.trip()
        elif initial == STATE_HALF_OPEN:
            self._dep.half_open()
        # The initial state is not a change: no listener is told (notify=False).
        self._state: CircuitBreakerState = self._create_new_state(initial, notify=False)
        self._bank.on_event(on_event)

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
        """The current state as an object with ``.name`` (the same object
        until the state changes)."""
        return self._sync_state()

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
        """pybreaker's failure count: failures since the last success or
        close, kept by the storage (it still reads ``fail_max`` once the
        failures opened the circuit). The core counts its own to trip."""
        return self._state_storage.counter

    def _inc_counter(self) -> None:
        self._state_storage.increment_counter()

    @property
    def success_counter(self) -> int:
        """Successful trial calls counted while half-open."""
        return int(self._dep.inspect()["half_open_successes"])

    def open(self) -> bool:
        """Opens the circuit until ``reset_timeout`` passes (a trip: it ends by
        itself). Returns ``throw_new_error_on_trip``."""
        with self._lock:
            self._dep.trip()
            self._sync_state()
        return self._throw_new_error_on_trip

    def half_open(self) -> None:
        """Starts a trial now: the next call decides."""
        with self._lock:
            self._dep.half_open()
            self._sync_state()

    def close(self) -> None:
        """Closes the circuit, counters cleared."""
        with self._lock:
            self._dep.reset()
            self._state_storage.reset_counter()
            self._sync_state()

    def _create_new_state(
        self, new_state: str, prev_state: CircuitBreakerState | None = None, notify: bool = False
    ) -> CircuitBreakerState:
        """The state object for ``new_state`` (pybreaker's; with ``notify``
        it tells the listeners of the change from ``prev_state``)."""
        # Looked up when called, as pybreaker does (tests patch the classes).
        classes: dict[str, Callable[..., CircuitBreakerState]] = {
            STATE_CLOSED: CircuitClosedState,
            STATE_OPEN: CircuitOpenState,
            STATE_HALF_OPEN: CircuitHalfOpenState,
        }
        try:
            cls = classes[new_state]
        except KeyError:
            raise ValueError(f"Unknown state {new_state!r}, valid states: {', '.join(classes)}") from None
        return cls(self, prev_state=prev_state, notify=notify)

    def _sync_state(self) -> CircuitBreakerState:
        """Reports the core's state: when it differs from the last one
        reported, a new state object tells the listeners (pybreaker's
        ``state_change``), before the call or action that caused it returns."""
        with self._lock:
            name = _STATE_NAMES[self._dep.state()]
            current = self._state
            if name != current.name:
                self._state_storage.state = name
                current = self._create_new_state(name, prev_state=current, notify=True)
                self._state = current
            return current

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

    # -- calls --------------------------------------------------------------

    def _admit(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        d = self._dep.admit()
        if not d.admitted:
            self._sync_state()
            raise CircuitBreakerError(_OPEN)
        if d.probe:
            # open -> half-open is reported when the trial call is admitted.
            self._sync_state()
        try:
            for listener in tuple(self._listeners):
                listener.before_call(self, func, *args, **kwargs)
        except BaseException:
            d.cancelled()
            raise
        return d

    def _succeeded(self, d: Any) -> None:
        d.success()
        self._after_success(d)

    def _after_success(self, d: Any) -> None:
        with self._lock:
            self._state_storage.reset_counter()
            if d.probe:
                self._sync_state()
        for listener in tuple(self._listeners):
            listener.success(self)

    def _failed(self, d: Any, exc: BaseException) -> None:
        """Records a raised exception; raises ``CircuitBreakerError`` in its
        place when it opened the circuit and ``throw_new_error_on_trip``."""
        outcome = d.finish(exc)
        if outcome == "success":
            self._after_success(d)
            return
        if outcome != "failure":
            if d.probe:
                self._sync_state()
            return
        with self._lock:
            self._inc_counter()
            for listener in tuple(self._listeners):
                listener.failure(self, exc)
            self._sync_state()
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
