"""relaymq-auth: authentication, per-destination authorization and audit, configured
with ActiveMQ's ``<simpleAuthenticationPlugin>``, ``<jaasAuthenticationPlugin>``,
``<jaasCertificateAuthenticationPlugin>``, ``<jaasDualAuthenticationPlugin>`` and
``<authorizationPlugin>`` (see docs/auth.md).

The API management and the console use: `security_service(broker)` ->
`SecurityService` with ``await authenticate(user, password)`` -> `Principal`
(name, groups) and ``authorize(principal, action, destination)`` -> bool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.lazy_names import lazy_names

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


__getattr__ = lazy_names(__name__, _LAZY)
