"""A small JSON-over-HTTP client of the ax agent protocol (standard library only).

Each thread keeps one keep-alive connection to the server, so the agent's
calls (a long-poll lease, heartbeats, result batches, log batches) run in
parallel from a thread pool without a new TCP connection per call.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from typing import Any

__all__ = ["Client", "StatusError"]

# A problem body (RFC 9457) is short; anything longer is cut for the error.
_MAX_ERROR_BODY = 8 << 10


class StatusError(Exception):
    """StatusError is an answer of the server other than 2xx.

    ``status`` is the HTTP status and ``problem`` the RFC 9457 body (the
    ``detail`` and ``errors`` naming the fields) when the server sent one.
    """

    def __init__(self, method: str, path: str, status: int, problem: dict[str, Any] | None, text: str) -> None:
        detail = (problem or {}).get("detail") or text[:200]
        super().__init__(f"{method} {path}: {status} {detail}")
        self.status = status
        self.problem = problem or {}

    @property
    def temporary(self) -> bool:
        """Whether trying again later may succeed (a 5xx or 429)."""
        return self.status >= 500 or self.status == 429


class Client:
    """Client calls the ax API at base_url with JSON bodies."""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"server URL {base_url!r} is not an absolute http:// or https:// URL")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self._timeout = timeout
        self._local = threading.local()
        self._active: set[http.client.HTTPConnection] = set()
        self._active_lock = threading.Lock()

    def _conn(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def abort(self) -> None:
        """abort ends the calls under way from other threads (their read fails with OSError)."""
        with self._active_lock:
            active = list(self._active)
        for conn in active:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def call(self, method: str, path: str, token: str, body: Any = None, timeout: float | None = None) -> Any:
        """call sends body as JSON and returns the decoded answer (None for 204).

        A connection the server closed while idle is opened again once; any
        other failure raises OSError or StatusError.
        """
        data = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, application/problem+json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._conn()
            conn.timeout = timeout if timeout is not None else self._timeout
            if conn.sock is not None:
                conn.sock.settimeout(conn.timeout)
            with self._active_lock:
                self._active.add(conn)
            try:
                conn.request(method, self._prefix + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop()
                if attempt == 2:
                    raise
                continue
            except http.client.HTTPException as e:
                # An answer cut off (IncompleteRead) or garbled on the way
                # is a network error like any other, retried by the caller:
                # it is no OSError, and escaping as itself it ended the
                # loop that reports results, for good.
                self._drop()
                raise ConnectionError(f"{method} {path}: broken answer: {e!r}") from e
            except BaseException:
                self._drop()
                raise
            finally:
                with self._active_lock:
                    self._active.discard(conn)
            if resp.will_close:
                self._drop()
            return self._decode(method, path, resp.status, raw)
        raise AssertionError("unreachable")

    @staticmethod
    def _decode(method: str, path: str, status: int, raw: bytes) -> Any:
        if 200 <= status < 300:
            try:
                return json.loads(raw) if raw else None
            except ValueError as e:  # not what ax answers: broken on the way
                raise ConnectionError(f"{method} {path}: answer is not JSON: {e}") from e
        text = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        try:
            problem = json.loads(text)
        except ValueError:
            problem = None
        raise StatusError(method, path, status, problem if isinstance(problem, dict) else None, text)
