"""The audit log: logger ``relaymq.audit``, one ``key=value`` line per event.

Events: ``login``, ``login-failed``, ``denied``, ``create`` and the administrative
operations management reports through `SecurityService.audit_operation`
(``delete``, ``purge``, ``move``, ...). Lines say who (user, groups), what
(action, destination) and from where (transport, remote address); never a
password. Route the logger to its own file with the usual logging configuration.
"""

from __future__ import annotations

import logging

from relaymq.broker.security import Principal

log = logging.getLogger("relaymq.audit")


def _value(v: object) -> str:
    text = str(v)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def line(event: str, **fields: object) -> str:
    return event + "".join(f" {k}={_value(v)}" for k, v in fields.items() if v is not None)


class AuditLog:
    def __init__(self, logger: logging.Logger = log) -> None:
        self.log = logger

    def _emit(self, level: int, event: str, **fields: object) -> None:
        if self.log.isEnabledFor(level):
            self.log.log(level, "%s", line(event, **fields))

    def login(self, principal: Principal, transport: str, remote: str | None,
              method: str) -> None:
        self._emit(logging.INFO, "login", user=principal.name,
                   groups=",".join(sorted(principal.groups)) or "-", transport=transport,
                   remote=remote, method=method)

    def login_failed(self, user: str | None, transport: str, remote: str | None,
                     reason: str, failures: int) -> None:
        self._emit(logging.WARNING, "login-failed", user=user if user is not None else "-",
                   transport=transport, remote=remote, reason=reason, failures=failures)

    def denied(self, principal: Principal, action: str, destination: object,
               transport: str | None, remote: str | None) -> None:
        self._emit(logging.WARNING, "denied", user=principal.name, action=action,
                   destination=destination, transport=transport, remote=remote)

    def operation(self, principal: Principal | None, operation: str, destination: object,
                  transport: str | None = None, remote: str | None = None, **extra: object) -> None:
        self._emit(logging.INFO, operation, user=principal.name if principal else "broker",
                   destination=destination, transport=transport, remote=remote, **extra)
