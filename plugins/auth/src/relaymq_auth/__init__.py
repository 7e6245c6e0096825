"""relaymq-auth: authentication, per-destination authorization and audit, configured
with ActiveMQ's ``<simpleAuthenticationPlugin>``, ``<jaasAuthenticationPlugin>``,
``<jaasCertificateAuthenticationPlugin>``, ``<jaasDualAuthenticationPlugin>`` and
``<authorizationPlugin>`` (see docs/auth.md).

The API management and the console use: `security_service(broker)` ->
`SecurityService` with ``await authenticate(user, password)`` -> `Principal`
(name, groups) and ``authorize(principal, action, destination)`` -> bool.
"""

from relaymq_auth.authn import LoginFailed
from relaymq_auth.passwords import hash_password
from relaymq_auth.service import SecurityService, security_service

__all__ = ["LoginFailed", "SecurityService", "hash_password", "security_service"]
