"""A real HTTP server on 127.0.0.1 that fails on demand, for the client
integrations' tests (stdlib http.server in a thread: no mock of any client)."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FlakyServer:
    """Answers ``GET /`` with the status set for the request's ``x-tenant``
    (``status``, else ``default``); counts requests per tenant in ``hits``.

    ``truncate``: the body is cut short (the connection closes mid-body).
    ``hold``: each response waits for ``release`` (at most 10 s) before its
    headers go out.
    """

    def __init__(self) -> None:
        self.default = 200
        self.status: dict[str, int] = {}
        self.truncate = False
        self.hold = False
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                tenant = self.headers.get("x-tenant", "")
                with server._lock:
                    server.hits[tenant] += 1
                server.arrived.release()
                if server.hold:
                    server.release.wait(10)
                try:
                    self.answer(tenant)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout, a cancelled task)

            def answer(self, tenant: str) -> None:
                code = server.status.get(tenant, server.default)
                body = f"status {code} for {tenant or '-'}\n".encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                if server.truncate:
                    self.send_header("Content-Length", str(len(body) + 1000))
                    self.end_headers()
                    self.wfile.write(body)
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def total_hits(self) -> int:
        with self._lock:
            return sum(self.hits.values())

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)


def refused_url() -> str:
    """A loopback URL where nothing listens: connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"
