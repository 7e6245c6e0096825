"""Logging for `relaymq run`: console, a rotating file, JSON lines, the audit log.

The broker configuration's `<logging>` element (`LoggingConfig`) or a Python
logging file (``--log-config``, dictConfig schema in YAML or JSON, never
``fileConfig``, which evaluates code) decides where log records go. The audit
logger ``relaymq.audit`` is separate: with an `<audit>` element its records go
only to the audit file, never to the broker log.
"""

from __future__ import annotations

import json
import logging
import logging.config
import logging.handlers
import sys
from pathlib import Path

import yaml

from relaymq.config.model import LogFileConfig, LoggingConfig
from relaymq.errors import ConfigError

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
AUDIT_LOGGER = "relaymq.audit"


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (and the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def _formatter(kind: str) -> logging.Formatter:
    return JsonLinesFormatter() if kind == "json" else logging.Formatter(TEXT_FORMAT)


def _file_handler(out: LogFileConfig, origin: str) -> logging.Handler:
    assert out.file is not None
    path = Path(out.file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max(0, out.max_file_size), backupCount=max(0, out.max_backup_index),
            encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"<logging> at {origin}: cannot write the log file {path}: "
                          f"{exc.strerror or exc}") from exc
    handler.setFormatter(_formatter(out.format))
    return handler


def configure_logging(config: LoggingConfig | None, log_config: str | None,
                      default_level: str) -> None:
    """Apply `log_config` (a dictConfig file) or `config`; without either keep stderr at
    `default_level` (what `_setup_logging` already installed)."""
    if log_config:
        _dict_config(log_config)
        return
    if config is None:
        return
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(config.level)
    if config.console:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(_formatter(config.output.format))
        root.addHandler(console)
    if config.output.file:
        root.addHandler(_file_handler(config.output, str(config.origin)))
    for name, level in config.loggers.items():
        logging.getLogger(name).setLevel(level)
    audit = logging.getLogger(AUDIT_LOGGER)
    if config.audit is not None and config.audit.file:
        audit.propagate = False
        for handler in list(audit.handlers):
            audit.removeHandler(handler)
        audit.addHandler(_file_handler(config.audit, str(config.origin)))
        audit.setLevel(logging.INFO)


def _dict_config(path: str) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"--log-config {path}: cannot read it: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"--log-config {path}: expected a mapping in Python's logging "
                          "dictConfig schema (version: 1, handlers:, loggers:, root:)")
    data.setdefault("version", 1)
    data.setdefault("disable_existing_loggers", False)
    try:
        logging.config.dictConfig(data)
    except (ValueError, TypeError, AttributeError, ImportError) as exc:
        raise ConfigError(f"--log-config {path}: {exc}") from exc
