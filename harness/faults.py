"""Faults between a client and its object store, injected with a botocore ``before-send`` hook
(S3) or the Azure store's request hook (``AzureStore.set_request_hook``, below the SDK's retries).

``FaultInjector(rate, seed).install(client)`` makes a fraction ``rate`` of the client's S3
requests fail in one of these ways (see PROTOCOL.md §2, the storage contract's ambiguous writes);
``install_store(store)`` does the same for an S3 or an Azure store:

* ``slowdown`` — a 503 SlowDown (Azure: ServerBusy) answer; nothing was sent (the SDK retries it);
* ``reset`` — the connection is reset before the request is sent;
* ``timeout`` — the connection times out before the request is sent;
* ``ambiguous_put`` — a PutObject is sent and lands, then its response is lost (a read
  timeout): the caller cannot know whether it was written.

It works against moto, MinIO or real S3 because it only sits in the client. ``counts`` tells
how many faults of each kind were injected.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError
from botocore.httpsession import URLLib3Session

KINDS = ("slowdown", "reset", "timeout", "ambiguous_put")
_SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)


class _Body:
    """The ``raw`` of an ``AWSResponse``: something with ``stream()``."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


class FaultInjector:
    def __init__(self, rate: float, seed: int | None = None, kinds: Sequence[str] = KINDS) -> None:
        unknown = set(kinds) - set(KINDS)
        if unknown or not 0.0 <= rate <= 1.0:
            raise ValueError(f"fault kinds {sorted(unknown)} unknown (known: {KINDS}) or rate {rate} not in [0, 1]")
        self.rate = rate
        self.kinds = tuple(kinds)
        self.rng = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.enabled = True
        self._http = URLLib3Session()

    def install(self, client: Any) -> FaultInjector:
        client.meta.events.register("before-send.s3", self)
        return self

    def install_store(self, store: Any) -> FaultInjector:
        """Inject into an Azure store's requests (its request hook) or an S3 store's (its client)."""
        if hasattr(store, "set_request_hook"):
            store.set_request_hook(self.azure_hook)
        else:
            self.install(store.client)
        return self

    def azure_hook(self, request: Any, send: Any) -> Any:
        """``AzureStore``'s request hook: the same faults, as azure-core errors and responses."""
        from azure.core.exceptions import ServiceRequestError, ServiceRequestTimeoutError, ServiceResponseTimeoutError

        if not self.enabled or self.rng.random() >= self.rate:
            return send()
        kind = self.rng.choice(self.kinds)
        if kind == "ambiguous_put" and request.method != "PUT":
            kind = "reset"
        self.counts[kind] += 1
        if kind == "slowdown":
            return _azure_busy(request)
        if kind == "reset":
            raise ServiceRequestError("connection reset (injected)")
        if kind == "timeout":
            raise ServiceRequestTimeoutError("connect timeout (injected)")
        send()  # the write lands ...
        raise ServiceResponseTimeoutError("read timeout (injected)")  # ... and its answer never arrives

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        if not self.enabled or self.rng.random() >= self.rate:
            return None
        kind = self.rng.choice(self.kinds)
        if kind == "ambiguous_put" and request.method != "PUT":
            kind = "reset"
        self.counts[kind] += 1
        if kind == "slowdown":
            return AWSResponse(request.url, 503, {"Content-Type": "application/xml"}, _Body(_SLOWDOWN_BODY))
        if kind == "reset":
            raise ConnectionClosedError(endpoint_url=request.url)
        if kind == "timeout":
            raise ConnectTimeoutError(endpoint_url=request.url)
        self._http.send(request)  # the write lands ...
        raise ReadTimeoutError(endpoint_url=request.url)  # ... and its answer never arrives


_BUSY_BODY = (
    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
    b"<Message>The server is busy.</Message></Error>"
)


def _azure_busy(request: Any) -> Any:
    """A 503 ServerBusy answer to ``request`` that never reached the server."""
    import requests
    from azure.core.pipeline.transport import RequestsTransportResponse

    answer = requests.Response()
    answer.status_code = 503
    answer.reason = "Server Busy"
    answer.headers.update(
        {"x-ms-error-code": "ServerBusy", "Content-Type": "application/xml", "Content-Length": str(len(_BUSY_BODY))}
    )
    answer._content = _BUSY_BODY
    answer.url = request.url
    return RequestsTransportResponse(request, answer)
