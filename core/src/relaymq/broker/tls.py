"""Server-side TLS contexts for connectors, from URI options."""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING

from relaymq.errors import ConfigError

if TYPE_CHECKING:
    from relaymq.spi.transport import ConnectorContext


def server_ssl_context(ctx: ConnectorContext) -> ssl.SSLContext | None:
    """Build a context when the scheme asks for TLS (`amqps`, `stomp+ssl`, `*+ssl`)
    or a certificate is given. Options: `certFile`/`keyStore` (PEM cert chain),
    `keyFile` (PEM key; defaults to the cert file), `caFile`/`trustStore` (CA
    bundle for client certificates), `needClientAuth=true`."""
    scheme = ctx.uri.scheme
    wants_tls = scheme.endswith("s") and scheme in ("amqps", "https", "wss") or "+ssl" in scheme
    cert = ctx.option("certFile") or ctx.option("keyStore")
    if not wants_tls and not cert:
        return None
    if not cert:
        raise ConfigError(
            f"connector {ctx.uri.raw} uses TLS but names no certificate; add "
            "?certFile=server.pem&keyFile=server.key to its URI"
        )
    key = ctx.option("keyFile") or None
    ca = ctx.option("caFile") or ctx.option("trustStore")
    for option, path in (("certFile", cert), ("keyFile", key), ("caFile", ca)):
        if path and not os.path.isfile(path):
            # ssl names no file in its error; the operator needs to know which one
            raise FileNotFoundError(2, f"TLS {option} does not exist", path)
    sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sslctx.load_cert_chain(cert, key, ctx.option("keyPassword"))
    if ca:
        sslctx.load_verify_locations(ca)
    if (ctx.option("needClientAuth") or "").lower() == "true":
        sslctx.verify_mode = ssl.CERT_REQUIRED
    elif (ctx.option("wantClientAuth") or "").lower() == "true":
        sslctx.verify_mode = ssl.CERT_OPTIONAL
    return sslctx
