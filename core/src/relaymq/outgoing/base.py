"""What every outgoing connection does the same way, whatever its protocol:
walk the failover list, wait between rounds, give up after the configured
rounds, and keep its state, peer and last error where management can read them.

A transport subclasses `ReconnectingConnection` and implements
`_connect_endpoint` (connect, authenticate, open, attach its links again; return
a future that completes when that connection is lost), `_shutdown` (close
politely) and `_give_up` (fail what still waits).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from relaymq.spi.outgoing import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionState,
    ConnectOptions,
    Endpoint,
    OutgoingError,
)

log = logging.getLogger("relaymq.outgoing")

Listener = Callable[[Any, ConnectionState], Any]


class ReconnectingConnection:
    """The connection policy shared by the transports' outgoing clients."""

    #: protocol name for messages ("AMQP", "STOMP")
    protocol = "outgoing"

    def __init__(self, uri: str, endpoints: list[Endpoint], options: ConnectOptions,
                 uri_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.endpoints = endpoints
        self.options = options
        self.uri_options = uri_options or {}
        self.name = options.name or uri
        self.state = ConnectionState.CONNECTING
        self.peer: str | None = None
        self.last_error: str | None = None
        #: the exception of the last failed attempt (None once open): its type says
        #: what failed (`AuthenticationFailed`: the peer refused the credentials)
        self.last_failure: BaseException | None = None
        #: epoch ms of the last state change
        self.state_since = int(time.time() * 1000)
        self.connects = 0  # times it opened
        self.failures = 0  # attempts that failed (one per host tried)
        self.loop = asyncio.get_running_loop()
        self._listeners: list[Listener] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._first: asyncio.Future[None] | None = None
        self._open_event = asyncio.Event()
        self._changed = asyncio.Event()
        self._closing = False
        self._error: OutgoingError | None = None
        #: host -> the failure last logged for it: a failure is logged when it changes
        #: (the first, or another error), not at every retry (DEBUG then)
        self._logged: dict[str, str] = {}

    # -- state ------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self.state is ConnectionState.OPEN

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _set_state(self, state: ConnectionState) -> None:
        if state is self.state and state is not ConnectionState.OPEN:
            return
        self.state = state
        self.state_since = int(time.time() * 1000)
        if state is ConnectionState.OPEN:
            self._open_event.set()
        else:
            self._open_event.clear()
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in list(self._listeners):
            try:
                listener(self, state)
            except Exception:  # noqa: BLE001 - a listener must not break the connection
                log.exception("listener of outgoing connection %s failed", self.name)

    def _failed_error(self) -> OutgoingError:
        if self._error is not None:
            return self._error
        return ConnectFailed(f"outgoing connection {self.name} is {self.state.value}")

    async def wait_open(self, timeout: float | None = None) -> None:
        """Wait until OPEN; raise `ConnectFailed` once FAILED or CLOSED."""
        async def wait() -> None:
            while self.state is not ConnectionState.OPEN:
                if self.state in (ConnectionState.FAILED, ConnectionState.CLOSED):
                    raise self._failed_error()
                await self._changed.wait()
        await asyncio.wait_for(wait(), timeout)

    # -- lifecycle --------------------------------------------------------------------
    async def connect(self) -> None:
        """Open the connection (the first host that answers, retrying per the
        policy); afterwards it reconnects by itself when it drops."""
        if self._closing:
            raise self._failed_error()
        if self._supervisor is None:
            self._first = self.loop.create_future()
            self._supervisor = self.loop.create_task(self._supervise(self._first),
                                                     name=f"outgoing {self.name}")
        assert self._first is not None
        await asyncio.shield(self._first)

    def start(self) -> None:
        """Connect in the background (broker connections do not hold up start-up)."""
        if self._supervisor is None:
            self._first = self.loop.create_future()
            self._first.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._supervisor = self.loop.create_task(self._supervise(self._first),
                                                     name=f"outgoing {self.name}")

    async def _supervise(self, first: asyncio.Future[None]) -> None:
        rounds = 0
        last: BaseException | None = None
        while not self._closing:
            for ep in self.endpoints:
                if self._closing:
                    return
                try:
                    lost = await self._connect_endpoint(ep)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - any failure is one failed attempt
                    last = exc
                    self.failures += 1
                    self.last_error = f"{ep}: {exc}"
                    self.last_failure = exc
                    self._log_failure(str(ep), str(exc))
                    continue
                rounds = 0
                self.peer = str(ep)
                self.connects += 1
                self._logged.clear()
                self.last_failure = None
                log.info("%s connection %s is open to %s", self.protocol, self.name, ep)
                self._set_state(ConnectionState.OPEN)
                if not first.done():
                    first.set_result(None)
                reason = await lost
                if self._closing:
                    return
                self.last_error = f"{ep}: {reason or 'connection lost'}"
                log.info("%s connection %s to %s lost: %s", self.protocol, self.name, ep,
                         reason or "closed")
                self._set_state(ConnectionState.RETRYING)
                break
            else:
                rounds += 1
                if 0 <= self.options.reconnect_attempts < rounds:
                    hosts = ", ".join(map(str, self.endpoints))
                    text = (f"{self.protocol} connection {self.name}: could not connect to {hosts} "
                            f"after {rounds} attempt(s); last error: {last}")
                    err: OutgoingError = (AuthenticationFailed(text)
                                          if isinstance(last, AuthenticationFailed)
                                          else ConnectFailed(text))
                    self._error = err
                    if self.last_error is None:
                        self.last_error = text
                    self._set_state(ConnectionState.FAILED)
                    if not first.done():
                        first.set_exception(err)
                    self._give_up(err)
                    return
                self._set_state(ConnectionState.RETRYING)
            if not self._closing:
                await asyncio.sleep(self.options.retry_interval)

    def _log_failure(self, host: str, error: str) -> None:
        if self._logged.get(host) == error:
            log.debug("%s connection %s to %s failed again: %s", self.protocol, self.name, host,
                      error)
            return
        self._logged[host] = error
        log.info("%s connection %s to %s failed: %s (logged again when it changes or after "
                 "it opens)", self.protocol, self.name, host, error)

    def failed_for_good(self) -> bool:
        """It gave up (``reconnect-attempts`` used up): only a new start retries."""
        return self.state is ConnectionState.FAILED and not self._closing

    async def close(self) -> None:
        """Close politely and stop reconnecting."""
        if self._closing:
            return
        self._closing = True
        try:
            await self._shutdown()
        except Exception:  # noqa: BLE001
            log.exception("closing %s connection %s failed", self.protocol, self.name)
        self._error = OutgoingError(f"{self.protocol} connection {self.name} was closed")
        self._give_up(self._error)
        if self._supervisor is not None:
            self._supervisor.cancel()
            try:
                await self._supervisor
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self._first is not None and not self._first.done():
            self._first.set_exception(self._error)
        self._set_state(ConnectionState.CLOSED)

    # -- for the transport ------------------------------------------------------------
    async def _connect_endpoint(self, ep: Endpoint) -> asyncio.Future[Any]:
        """Connect to `ep`; return a future whose result (a reason or None) says
        the connection was lost."""
        raise NotImplementedError

    async def _shutdown(self) -> None:
        """Close the current connection politely (the policy stops afterwards)."""

    def _give_up(self, error: OutgoingError) -> None:
        """Fail every send and link still waiting: the connection will not come back."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.state.value} peer={self.peer}>"
