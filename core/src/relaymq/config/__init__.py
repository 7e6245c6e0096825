"""Configuration: activemq.xml-style XML (and the same tree in YAML) -> `BrokerConfig`.

```python
from relaymq.config import load_config
config = load_config("activemq.xml", properties={"activemq.data": "/var/lib/relaymq"})
```

`convert` is the typed conversion the plugin registry applies to a plugin's
``Config`` dataclass; plugin authors may call it for nested elements too.
"""

from relaymq.config.loader import load_config, load_config_text
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
