"""Requests to a Kubernetes API server through the official client's `ApiClient` (its kubeconfig and in-cluster
loading, credentials, TLS and connection pool), with JSON in and out as plain dicts, errors as the cluster port's
exceptions, client-side QPS/burst limits, and retries of what a retry cannot double.

Retried, with jittered back-off: any request the server refused with 429 (API priority and fairness: it did not
run it; its Retry-After is honoured), and reads that failed with a 5xx or no answer. Not retried: writes that got a
5xx or no answer (the write may have happened; the caller reads the cache and decides again), and the eviction
API's 429 (a PodDisruptionBudget's answer, which the drain retries on its own schedule).

A transport may be fenced (`fenced(check)`): `check` runs just before every write is sent, each retry included, and
raises to stop it (the engine's: "do I still hold my Lease, with margin?"); reads and watches are never fenced.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import urllib3

from provisioner.adapters.backoff import Backoff
from provisioner.adapters.errors import Unreachable, error_for
from provisioner.adapters.official import client, config
from provisioner.adapters.ratelimit import TokenBucket
from provisioner.cluster.objects import APIError, TooManyRequests

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
# Karpenter's KUBE_CLIENT_QPS and KUBE_CLIENT_BURST defaults (operator/options/options.go:218-219).
DEFAULT_QPS = 200.0
DEFAULT_BURST = 300
REQUEST_TIMEOUT = 30.0
CONNECT_TIMEOUT = 5.0
READS = ("GET",)

Query = Sequence[tuple[str, str]]


class Transport:
    def __init__(
        self,
        api_client: Any,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        retries: int = 3,
        request_timeout: float = REQUEST_TIMEOUT,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api_client = api_client
        self.limiter = TokenBucket(qps, burst)
        self.retries = retries
        self.request_timeout = request_timeout
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not secrets
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests = 0  # every request sent, retries included (tests count writes through `sent`)
        self.sent: list[tuple[str, str]] = []  # (method, path) of every request sent, when `record` is on
        self.record = False
        self.fence: Callable[[], None] | None = None  # runs before each write is sent; raises to refuse it

    def fenced(self, check: Callable[[], None]) -> Transport:
        """This transport (its connections, rate limit and record of requests shared) with `check` run before every
        write."""
        other = copy.copy(self)
        other.fence = check
        return other

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None, **options: Any) -> Transport:
        configuration = client.Configuration()
        config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
        return cls(_api_client(configuration), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> Transport:
        """The pod's service account (its token is re-read as the kubelet rotates it)."""
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return cls(_api_client(configuration), **options)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Any = None,
        content_type: str = JSON,
        eviction: bool = False,
    ) -> Any:
        """Send one request and return its decoded JSON body; raise the port's error for an error answer."""
        backoff = Backoff(initial=0.2, maximum=5.0, rng=self._rng)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._send(method, path, query, body, content_type, self.request_timeout)
                data = response.data
                return json.loads(data) if data else {}
            except APIError as error:
                wait = self._retry_after(error, method, eviction, attempt)
                if wait is None:
                    raise
                self._sleep(wait if wait > 0 else backoff.next())

    def _retry_after(self, error: APIError, method: str, eviction: bool, attempt: int) -> float | None:
        """Seconds to wait before retrying (0: back-off decides), or None to give up and raise."""
        if attempt > self.retries:
            return None
        if isinstance(error, TooManyRequests) and not eviction:
            return float(getattr(error, "retry_after", 0) or 0)
        if method in READS and (isinstance(error, Unreachable) or error.code >= 500):
            return 0.0
        return None

    def watch(self, path: str, query: Query, read_timeout: float) -> WatchStream:
        """Open a watch; iterate the result for its events, close it from any thread to end it."""
        response = self._send("GET", path, query, None, JSON, read_timeout, stream=True)
        return WatchStream(response)

    def _send(
        self,
        method: str,
        path: str,
        query: Query,
        body: Any,
        content_type: str,
        read_timeout: float,
        *,
        stream: bool = False,
    ) -> Any:
        if self.fence is not None and method not in READS:
            self.fence()
        self.limiter.take()
        with self._lock:
            self.requests += 1
            if self.record:
                self.sent.append((method, path))
        try:
            return self.api_client.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Accept": JSON, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(CONNECT_TIMEOUT, read_timeout),
            )
        except client.ApiException as error:
            if error.status == 0:
                raise Unreachable(str(error.reason)) from None
            failure = error_for(int(error.status), error.body)
            retry_after = (error.headers or {}).get("Retry-After")
            if retry_after and retry_after.isdigit():
                failure.retry_after = int(retry_after)  # type: ignore[attr-defined]
            raise failure from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise Unreachable(f"{type(error).__name__}: {error}") from None


def _api_client(configuration: Any) -> Any:
    # Our own retries and back-off decide; urllib3 should report a failure at once, not retry it three times.
    configuration.retries = urllib3.util.Retry(total=0, redirect=0, raise_on_status=False)
    # A watch per informed kind (23) holds a connection; writes, and kube.EVICTION_WORKERS evictions at once, need more.
    configuration.connection_pool_maxsize = 64
    return client.ApiClient(configuration)


class WatchStream:
    """The events of one watch response, decoded line by line as they arrive."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.closed = False

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        buffer = b""
        try:
            while not self.closed:
                chunk = self._response.read1(65536)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError):
            # Cut mid-stream (or closed by `close` from another thread): the watch just ends; a partial last
            # line is dropped and the informer watches again from the last version it saw.
            return
        finally:
            self.close()
        if buffer.strip():
            try:
                yield json.loads(buffer)
            except ValueError:
                return

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        # shutdown() wakes a read blocked in another thread; close() drops the half-read connection, so the pool
        # never hands it out again; release_conn() returns its slot.
        for step in ("shutdown", "close", "release_conn"):
            try:
                getattr(self._response, step)()
            except Exception:  # noqa: S112 - already closed: the next step still has to run
                continue
