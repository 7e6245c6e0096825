"""Configuration: activemq.xml-style XML (and the same tree in YAML) -> `BrokerConfig`.

```python
from relaymq.config import load_config
config = load_config("activemq.xml", properties={"activemq.data": "/var/lib/relaymq"})
```

`convert` is the typed conversion the plugin registry applies to a plugin's
``Config`` dataclass; plugin authors may call it for nested elements too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relaymq.config.model import (
    BrokerConfig,
    DeadLetterStrategyConfig,
    DestinationDecl,
    Origin,
    PluginElement,
    PolicyEntryConfig,
    SystemUsageConfig,
    TransportConnectorConfig,
    UsageLimit,
)
from relaymq.config.typed import BYTES, Bytes, convert, parse_bool, parse_size
from relaymq.errors import ConfigError

if TYPE_CHECKING:
    from relaymq.config.loader import load_config, load_config_text

__all__ = [
    "BYTES",
    "BrokerConfig",
    "Bytes",
    "ConfigError",
    "DeadLetterStrategyConfig",
    "DestinationDecl",
    "Origin",
    "PluginElement",
    "PolicyEntryConfig",
    "SystemUsageConfig",
    "TransportConnectorConfig",
    "UsageLimit",
    "convert",
    "load_config",
    "load_config_text",
    "parse_bool",
    "parse_size",
]


def __getattr__(name: str) -> Any:
    """`load_config` and `load_config_text` on first use: the loader brings the YAML
    and XML parsers, which the plugin registry and `relaymq --help` (importing
    `relaymq.config.model`, hence this package) do not need."""
    if name in ("load_config", "load_config_text"):
        from relaymq.config import loader

        value = getattr(loader, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
