"""`<logging>` -> `LoggingConfig`: levels, a rotating log file, JSON lines, the audit log.

ActiveMQ configures logging in a separate log4j file; RelayMQ reads the same
choices from one element of the broker configuration (or a Python logging file
given to ``relaymq run --log-config``):

```xml
<logging level="INFO" file="${activemq.data}/relaymq.log" maxFileSize="50 mb"
         maxBackupIndex="5" format="json" console="true">
  <loggers><logger name="relaymq.stomp" level="DEBUG"/></loggers>
  <audit file="${activemq.data}/audit.log" format="json"/>
</logging>
```

In YAML: ``logging: {level: INFO, file: ..., loggers: [{logger: {name: relaymq.stomp,
level: DEBUG}}], audit: {file: ...}}``. A bare ``<logger>`` directly inside
``<logging>`` is accepted too.
"""

from __future__ import annotations

from relaymq.config.context import BuildContext
from relaymq.config.model import BrokerConfig, LogFileConfig, LoggingConfig
from relaymq.config.report import at
from relaymq.config.tree import Node

LEVELS = ("CRITICAL", "ERROR", "WARNING", "WARN", "INFO", "DEBUG", "TRACE")
FORMATS = ("text", "json")
FILE_ATTRIBUTES = ("file", "maxFileSize", "maxBackupIndex", "format")
LOGGING_ATTRIBUTES = ("level", "console", *FILE_ATTRIBUTES)
LOGGING_ELEMENTS = ("logging", "loggers", "logger", "audit")


def _level(ctx: BuildContext, node: Node, raw: str) -> str | None:
    level = raw.strip().upper()
    if level not in LEVELS:
        ctx.report.error(f"<{node.tag}>{at(node.origin)}: level \"{raw}\" is not one of "
                         + ", ".join(LEVELS))
        return None
    return {"WARN": "WARNING", "TRACE": "DEBUG"}.get(level, level)


def _file(ctx: BuildContext, node: Node) -> LogFileConfig | None:
    out = ctx.typed(LogFileConfig, node,
                    ignore=("level", "console", "name", "loggers", "logger", "audit"))
    if out is not None and out.format not in FORMATS:
        ctx.report.error(f"<{node.tag}>{at(node.origin)}: format \"{out.format}\" is not one of "
                         + ", ".join(FORMATS))
        return None
    return out


def logging_element(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    out = LoggingConfig(origin=node.origin)
    attrs = ctx.attrs(node)
    if "level" in attrs:
        out.level = _level(ctx, node, attrs["level"]) or out.level
    if "console" in attrs:
        out.console = attrs["console"].strip().lower() not in ("false", "0", "no")
    output = _file(ctx, node)
    if output is not None:
        out.output = output
    children = []
    for child in node.children:
        # `<loggers>` wraps repeated <logger>s (the form the YAML mapping needs)
        children.extend(child.children if child.tag == "loggers" and not child.foreign else [child])
    for child in children:
        if child.foreign:
            ctx.ignore_foreign(child, node)
        elif child.tag == "logger":
            child_attrs = ctx.attrs(child)
            name = child_attrs.get("name", "").strip()
            level = _level(ctx, child, child_attrs.get("level", ""))
            if not name:
                ctx.report.error(f"<logger>{at(child.origin)} needs name=\"LOGGER\"")
            elif level is not None:
                out.loggers[name] = level
        elif child.tag == "audit":
            audit = _file(ctx, child)
            if audit is not None:
                out.audit = audit
        else:
            ctx.unknown_element(child, node, ["logger", "audit"])
    config.logging = out
