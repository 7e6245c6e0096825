"""Server-side TLS contexts for connectors, from URI options."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable

from relaymq.errors import ConfigError


def server_ssl_context(scheme: str, uri: str,
                       option: Callable[[str], str | None]) -> ssl.SSLContext | None:
    """Build a context when the scheme asks for TLS (`amqps`, `stomp+ssl`, `*+ssl`)
    or a certificate is given. Options: `certFile`/`keyStore` (PEM cert chain),
    `keyFile` (PEM key; defaults to the cert file), `caFile`/`trustStore` (CA
    bundle for client certificates), `needClientAuth=true`; `option(name)` reads
    one (`ConnectorContext.option`, which marks it used)."""
    wants_tls = scheme.endswith("s") and scheme in ("amqps", "https", "wss") or "+ssl" in scheme
    cert = option("certFile") or option("keyStore")
    if not wants_tls and not cert:
        return None
    if not cert:
        raise ConfigError(
            f"connector {uri} uses TLS but names no certificate; add "
            "?certFile=server.pem&keyFile=server.key to its URI"
        )
    key = option("keyFile") or None
    ca = option("caFile") or option("trustStore")
    for name, path in (("certFile", cert), ("keyFile", key), ("caFile", ca)):
        if path and not os.path.isfile(path):
            # ssl names no file in its error; the operator needs to know which one
            raise FileNotFoundError(2, f"TLS {name} does not exist", path)
    sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sslctx.load_cert_chain(cert, key, option("keyPassword"))
    if ca:
        sslctx.load_verify_locations(ca)
    if (option("needClientAuth") or "").lower() == "true":
        sslctx.verify_mode = ssl.CERT_REQUIRED
    elif (option("wantClientAuth") or "").lower() == "true":
        sslctx.verify_mode = ssl.CERT_OPTIONAL
    return sslctx
