"""Errors the kernel raises to clients, transports and operators."""

from __future__ import annotations


class RelayMQError(Exception):
    """Base of RelayMQ's own errors."""


class ConfigError(RelayMQError):
    """The configuration is wrong; the message names file:line and what to do.

    One load can find many problems; `errors` keeps every one of them (each a
    complete sentence with its file:line) so `relaymq config check` can list them
    all instead of making the operator fix one per run.
    """

    def __init__(self, message: str = "", errors: list[str] | None = None) -> None:
        self.errors: list[str] = list(errors) if errors else ([message] if message else [])
        super().__init__(message or "\n".join(self.errors))


# ---------------------------------------------------------------------------
# Plugins: a missing, broken or ambiguous plugin stops the start-up.
# ---------------------------------------------------------------------------


class PluginError(ConfigError):
    """A plugin named by the configuration cannot be used.

    A subclass of `ConfigError` because the fix is always in the configuration or
    in what is installed, and `config check` reports both the same way.
    """


class PluginNotFound(PluginError, LookupError):
    """No installed distribution provides the entry point the configuration names."""


class PluginLoadError(PluginError):
    """An entry point exists but importing or building it failed; the cause is chained."""


class PluginConflict(PluginError):
    """Two distributions claim one name in one entry-point group ("last one wins" is a bug)."""


class PluginHookError(PluginError):
    """A plugin implements a hook that no spec declares, or with arguments the spec lacks."""


class StartupError(RelayMQError):
    """The broker could not start for a reason outside the configuration's syntax:
    a port already in use, a permission refused, a host that does not resolve, a
    TLS file that is missing. The message is one line naming the connector, the
    address and the configuration line; `exit_status` is what `relaymq run` exits
    with (documented in docs/cli.md)."""

    exit_status = 3


class StoreLockedError(StartupError):
    """The store is held by another broker and this one was told not to wait."""

    exit_status = 4


class SecurityError(RelayMQError):
    """Authentication or authorization refused the request."""


class ResourceLimitExceeded(RelayMQError):
    """A usage limit is reached and the policy says to refuse (`sendFailIfNoSpace`)."""


class StateConflict(RelayMQError):
    """An operation the object cannot do in the state it is in now (a mirror's sync
    while it is not connected): management answers 409, the request may work later."""


class DestinationError(RelayMQError):
    """A destination cannot be used this way (deleted, wrong kind, empty name)."""


class DestinationNameError(DestinationError, ValueError):
    """A destination name the broker cannot create: too long for its store's keys.
    Refused before anything is made; only the request that names it fails."""


class SubscriptionInUse(RelayMQError):
    """An unsubscribe or a second attach for a durable subscription that has a consumer."""


class ClientIdInUse(RelayMQError):
    """A connection asked for a client id another connection holds."""


class TransactionError(RelayMQError):
    """An unknown transaction id, or one used after it ended."""


class UnknownDelivery(RelayMQError):
    """An ack/nack named a delivery the consumer does not hold."""


class MessageFormatError(RelayMQError):
    """A message carries a field or property value the broker cannot use (e.g. an
    `_AMQ_DUPL_ID` that is neither a string nor binary); only that send fails."""


class StoreWriteError(RelayMQError):
    """The store could not write a batch of work (disk full, an I/O error, a
    database error): the sends, acknowledgements and commits of that batch failed
    and their clients get this error; work stored before it is kept, and later
    batches are written again if the store recovers. The cause is chained."""
