"""One-line explanations of why a connector could not start listening.

A port in use, a privileged port, a host name that does not resolve, a TLS file
that is missing: each is something the operator fixes in the configuration or on
the machine, so `relaymq run` prints one line naming the connector, the address
and the configuration line, and exits with `StartupError.exit_status`, instead of
a traceback.
"""

from __future__ import annotations

import errno
import socket
import ssl

from relaymq.config.model import TransportConnectorConfig
from relaymq.config.report import at


def _reason(host: str, port: int | None, exc: OSError) -> str:
    address = f"{host}:{port}"
    if isinstance(exc, socket.gaierror):
        return f"host '{host}' does not resolve ({exc.strerror or exc})"
    if exc.errno == errno.EADDRINUSE:
        return (f"address {address} is already in use (another broker, or another "
                f"program, listens there; stop it or choose another port)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        hint = " (ports below 1024 need privileges)" if (port or 0) < 1024 else ""
        return f"permission denied to listen on {address}{hint}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"address {host} is not an address of this machine"
    if isinstance(exc, FileNotFoundError) and exc.filename:
        what = exc.strerror if exc.strerror and "TLS" in exc.strerror else "file does not exist"
        return f"{what}: {exc.filename}"
    if isinstance(exc, ssl.SSLError):
        return f"the TLS certificate or key cannot be used ({exc.reason or exc})"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"file {exc.filename} cannot be read (permission denied)"
    text = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename:
        text = f"{text}: {exc.filename}"
    return f"cannot listen on {address}: {text}"


def listen_failure(tc: TransportConnectorConfig, host: str, port: int | None,
                   exc: OSError) -> str:
    """`<transportConnector name="amqp" uri="..."> at activemq.xml:12: address ... in use`."""
    name = f' name="{tc.name}"' if tc.name else ""
    return f'<transportConnector{name} uri="{tc.uri}">{at(tc.origin)}: {_reason(host, port, exc)}'
