"""A requests adapter behind a breaker: ``pip install 'breakerbank[requests]'``.

>>> import requests, breakerbank as bb
>>> from breakerbank.requests import BreakerAdapter
>>> http = requests.Session()
>>> http.mount("https://payments.internal/", BreakerAdapter(
...     bank["payments_client"], tenant=lambda request: request.headers["x-tenant"]))  # doctest: +SKIP

Each request sent through the adapter (each redirect hop too)
is one admission on the dependency (for the tenant, a string or a callable
of the :class:`requests.PreparedRequest`). A 5xx response, a connection
error or a timeout is a failure, a 4xx or any other response a success,
unless ``classify`` says otherwise. The outcome is recorded once the body
is read, which the adapter does itself when the request is not streamed,
so an error mid-body counts; for ``stream=True`` it is recorded from the
status when the headers arrive (requests has no hook at the end of a
streamed body). A refused request never reaches the server: it raises
:class:`breakerbank.DependencyUnavailable`, or returns ``degraded(request)``
(a :class:`requests.Response`) when the profile declares a ``degraded``
fallback. The rules in full: :mod:`breakerbank._http`.

Other keyword arguments (``pool_connections``, ``max_retries``…) go to
:class:`requests.adapters.HTTPAdapter`; retries made by urllib3 happen
inside one admission.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from ._http import Classify, Gate, Tenant
from ._native import Dependency

__all__ = ["BreakerAdapter"]


class BreakerAdapter(HTTPAdapter):
    """A :class:`requests.adapters.HTTPAdapter` that admits each request through a breaker."""

    def __init__(
        self,
        dependency: Dependency,
        *,
        tenant: Tenant = None,
        classify: Classify | None = None,
        degraded: Callable[[requests.PreparedRequest], requests.Response] | None = None,
        **adapter_kwargs: Any,
    ) -> None:
        self._gate = Gate(dependency, tenant, classify, degraded)
        super().__init__(**adapter_kwargs)

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        gate = self._gate
        d = gate.admit(request)
        if not d.admitted:
            refused: requests.Response = gate.refuse(d, request)
            return refused
        try:
            response = super().send(
                request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies
            )
            if not stream:
                response.content  # noqa: B018 - read the body here, so an error in it counts
        except BaseException as e:
            gate.record(d, e, None)
            raise
        gate.record(d, response, response.status_code)
        return response
