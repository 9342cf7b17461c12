"""httpx transports behind a breaker: ``pip install 'breakerbank[httpx]'``.

>>> import httpx, breakerbank as bb
>>> from breakerbank.httpx import BreakerTransport
>>> dep = bank["payments_client"]                             # doctest: +SKIP
>>> client = httpx.Client(transport=BreakerTransport(
...     dep, tenant=lambda request: request.headers["x-tenant"]))  # doctest: +SKIP

Each request is one admission on the dependency (for the tenant, a string
or a callable of the :class:`httpx.Request`). An admitted request goes to
the wrapped transport (by default a new :class:`httpx.HTTPTransport`); its
outcome is recorded when the response is closed, that is once its body was
read (``client.get``) or when a streamed response is closed
(``client.stream``): a 5xx response or an error while connecting or reading
is a failure, a 4xx or any other response a success, unless ``classify``
says otherwise. A refused request never reaches the server: it raises
:class:`breakerbank.DependencyUnavailable`, or returns ``degraded(request)``
(an :class:`httpx.Response`) when the profile declares a ``degraded``
fallback. The rules in full: :mod:`breakerbank._http`.

:class:`AsyncBreakerTransport` is the same for :class:`httpx.AsyncClient`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import cast

import httpx

from ._http import Classify, Gate, Tenant
from ._native import Decision, Dependency

__all__ = ["AsyncBreakerTransport", "BreakerTransport"]


class BreakerTransport(httpx.BaseTransport):
    """An :class:`httpx.BaseTransport` that admits each request through a breaker."""

    def __init__(
        self,
        dependency: Dependency,
        *,
        tenant: Tenant = None,
        classify: Classify | None = None,
        degraded: Callable[[httpx.Request], httpx.Response] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._gate = Gate(dependency, tenant, classify, degraded)
        self._transport = transport if transport is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        gate = self._gate
        d = gate.admit(request)
        if not d.admitted:
            response: httpx.Response = gate.refuse(d, request)
            return response
        try:
            response = self._transport.handle_request(request)
        except BaseException as e:
            gate.record(d, e, None)
            raise
        response.stream = _Stream(cast(httpx.SyncByteStream, response.stream), gate, d, response)
        return response

    def close(self) -> None:
        self._transport.close()


class AsyncBreakerTransport(httpx.AsyncBaseTransport):
    """An :class:`httpx.AsyncBaseTransport` that admits each request through a breaker."""

    def __init__(
        self,
        dependency: Dependency,
        *,
        tenant: Tenant = None,
        classify: Classify | None = None,
        degraded: Callable[[httpx.Request], httpx.Response] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._gate = Gate(dependency, tenant, classify, degraded)
        self._transport = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        gate = self._gate
        d = gate.admit(request)
        if not d.admitted:
            response: httpx.Response = gate.refuse(d, request)
            return response
        try:
            response = await self._transport.handle_async_request(request)
        except BaseException as e:
            gate.record(d, e, None)
            raise
        response.stream = _AsyncStream(cast(httpx.AsyncByteStream, response.stream), gate, d, response)
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


class _Stream(httpx.SyncByteStream):
    """The response body: an error while reading it is the call's outcome;
    closing it records the response's."""

    __slots__ = ("_inner", "_gate", "_d", "_response")

    def __init__(self, inner: httpx.SyncByteStream, gate: Gate, d: Decision, response: httpx.Response) -> None:
        self._inner = inner
        self._gate = gate
        self._d = d
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._inner
        except GeneratorExit:  # the reader stopped early; closing decides
            raise
        except BaseException as e:
            self._gate.record(self._d, e, None)
            raise

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._gate.record(self._d, self._response, self._response.status_code)


class _AsyncStream(httpx.AsyncByteStream):
    """The async twin of :class:`_Stream`."""

    __slots__ = ("_inner", "_gate", "_d", "_response")

    def __init__(self, inner: httpx.AsyncByteStream, gate: Gate, d: Decision, response: httpx.Response) -> None:
        self._inner = inner
        self._gate = gate
        self._d = d
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as e:
            self._gate.record(self._d, e, None)
            raise

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._gate.record(self._d, self._response, self._response.status_code)
