"""`<console>`: the console's HTTP server, on the broker's event loop (uvicorn)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from importlib.metadata import entry_points
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.config.report import Report
from relaymq.config.typed import convert
from relaymq.errors import ConfigError, StartupError

from relaymq_console.config import ConsoleConfig, open_console

log = logging.getLogger("relaymq.console")


class ConsolePlugin:
    """Serves the web console, /api/v1, /metrics and ActiveMQ's monitoring endpoints."""

    tag = "console"

    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.broker: Any = None
        self.server: Any = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any = None) -> ConsolePlugin:
        return cls(_checked(convert(ConsoleConfig, element)))

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False,
                         config: Any = None) -> list[str]:
        """`relaymq config check` (and `run`, before it starts anything): the attributes,
        and, given the whole configuration, the exposure rule `start` applies."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        cfg = _checked(convert(ConsoleConfig, element, strict=strict, report=report))
        report.raise_if_errors()
        if config is not None:
            gives_logins = auth_elements()
            exposure_check(cfg, any(el.tag in gives_logins for el in config.plugins))
        return report.warnings

    def install(self, broker: Any) -> None:
        self.broker = broker
        broker.extensions["console"] = self
        if self.config.jmx_domain_name is None:  # <managementContext jmxDomainName=...>
            for el in getattr(broker.config, "extra", {}).get("implied_plugins", []):
                if el.tag == "console" and el.attributes.get("jmxDomainName"):
                    self.config.jmx_domain_name = el.attributes["jmxDomainName"]

    @property
    def address(self) -> str:
        scheme = "https" if self.config.tls_cert_file else "http"
        port = self.port
        return f"{scheme}://{self.config.host}:{port}"

    @property
    def port(self) -> int:
        if self.server is not None and self.server.servers:
            return int(self.server.servers[0].sockets[0].getsockname()[1])
        return self.config.port

    async def start(self) -> None:
        import uvicorn

        from relaymq_console.app import build_app

        cfg = self.config
        app, access = build_app(self.broker, cfg)
        exposure_check(cfg, access.auth is not None)
        # the console binds its socket itself: uvicorn would end the whole process
        # (sys.exit) when it cannot, and a broker reports that as one line instead
        try:
            sock = socket.create_server((cfg.host, cfg.port), reuse_port=False)
        except OSError as exc:
            raise StartupError(f"<console>{_at(cfg)}: cannot listen on {cfg.host}:{cfg.port}: "
                               f"{exc.strerror or exc}") from exc
        # X-Forwarded-For and -Proto only from the configured proxies (uvicorn would
        # believe them from 127.0.0.1, or FORWARDED_ALLOW_IPS, by default)
        uv_config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off",
            ssl_certfile=cfg.tls_cert_file, ssl_keyfile=cfg.tls_key_file,
            proxy_headers=bool(cfg.trusted_proxies),
            forwarded_allow_ips=list(cfg.trusted_proxies))
        self.server = uvicorn.Server(uv_config)
        self.server.install_signal_handlers = lambda: None  # relaymq run owns the signals
        self._task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[sock]))
        while not self.server.started:
            if self._task.done():
                sock.close()
                raise StartupError(f"<console>{_at(cfg)}: the server on {cfg.host}:{cfg.port} "
                                   "stopped while starting")
            await asyncio.sleep(0.01)
        log.info("console on %s%s", self.address, _at(cfg) if cfg.implied_by else "")

    async def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 10)
            except (TimeoutError, asyncio.CancelledError, SystemExit):
                self._task.cancel()
            except Exception:  # noqa: BLE001 - the server failed; it is stopped either way
                log.exception("the console server failed")


def auth_elements() -> set[str]:
    """The `<plugins>` elements that give the broker users (relaymq-auth's, by their
    entry points): with one, `broker.extensions["auth"]` authenticates console logins."""
    return {ep.name for ep in entry_points(group="relaymq.broker_plugins")
            if ep.value.startswith("relaymq_auth.")}


def exposure_check(cfg: ConsoleConfig, has_auth: bool) -> None:
    """ConfigError when the console would serve other machines without a login: a
    non-local `host` while nobody logs in (`open_console`) and `allowUnauthenticated`
    is not set. `relaymq config check` and the console's start apply this one rule."""
    if cfg.local or cfg.allow_unauthenticated or not open_console(cfg, has_auth):
        return
    how = ("authenticate=\"false\"" if not cfg.authenticate
           else "no users: configure relaymq-auth (<simpleAuthenticationPlugin> or JAAS) "
                "or usersFile")
    raise ConfigError(
        f"<console host=\"{cfg.host}\">{_at(cfg)} would serve the console to other "
        f"machines without authentication ({how}); bind to 127.0.0.1, or set "
        "allowUnauthenticated=\"true\"")


def _checked(cfg: ConsoleConfig) -> ConsoleConfig:
    """`trustedProxies` holds addresses and networks only: a typo must not trust a
    name nobody connects from, or anything else silently."""
    for entry in cfg.trusted_proxies:
        try:
            ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            raise ConfigError(f"<console trustedProxies>{_at(cfg)}: {entry!r} is not an IP "
                              "address or network (10.0.0.5, 10.0.0.0/24)") from None
    cfg.trusted_proxies = [e.strip() for e in cfg.trusted_proxies if e.strip()]
    return cfg


def _at(cfg: ConsoleConfig) -> str:
    if cfg.implied_by:
        return f" (from {cfg.implied_by})"
    return f" at {cfg.origin}" if cfg.origin.line else ""
