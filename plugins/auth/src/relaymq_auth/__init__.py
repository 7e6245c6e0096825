"""relaymq-auth: authentication, per-destination authorization and audit, configured
with ActiveMQ's ``<simpleAuthenticationPlugin>``, ``<jaasAuthenticationPlugin>``,
``<jaasCertificateAuthenticationPlugin>``, ``<jaasDualAuthenticationPlugin>`` and
``<authorizationPlugin>`` (see docs/auth.md).

The API management and the console use: `security_service(broker)` ->
`SecurityService` with ``await authenticate(user, password)`` -> `Principal`
(name, groups) and ``authorize(principal, action, destination)`` -> bool.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from relaymq_auth.passwords import hash_password

if TYPE_CHECKING:
    from relaymq_auth.authn import LoginFailed
    from relaymq_auth.service import SecurityService, security_service

_LAZY = {
    "LoginFailed": "relaymq_auth.authn",
    "SecurityService": "relaymq_auth.service",
    "security_service": "relaymq_auth.service",
}

__all__ = ["LoginFailed", "SecurityService", "hash_password", "security_service"]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: `relaymq <command> --help` and the
    other plugin commands import this package without needing the security service."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
