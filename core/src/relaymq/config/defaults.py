"""The configuration `relaymq run` uses without ``--config``.

"Installed is not enabled" has one documented exception: with no config file at
all, the broker enables every installed first-party transport on its standard
port and the journal store when it is installed, so ``pip install relaymq-amqp
relaymq-kahadb && relaymq run`` gives a useful broker. A config file always
says exactly what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from relaymq.config.model import BrokerConfig, Origin, PluginElement, TransportConnectorConfig
from relaymq.config.properties import Properties

if TYPE_CHECKING:
    from relaymq.plugins import PluginRegistry

#: First-party transports the default config enables, with their standard ports.
DEFAULT_PORTS: dict[str, int] = {"amqp": 5672, "stomp": 61613}
DEFAULT_SOURCE = "<default config>"


def default_config(
    registry: PluginRegistry,
    properties: Mapping[str, str] | None = None,
    *,
    base_dir: Path | None = None,
    host: str = "127.0.0.1",
) -> BrokerConfig:
    """Every installed first-party transport, and kahaDB in ``${relaymq.data}/kahadb``
    (``./data/kahadb``) when installed, else the memory store."""
    props = Properties(properties, base_dir=base_dir)
    data = props.get("relaymq.data") or str(Path.cwd() / "data")
    origin = Origin(DEFAULT_SOURCE)
    installed = set(registry.names("relaymq.transports"))
    connectors = [
        TransportConnectorConfig(name=scheme, uri=f"{scheme}://{host}:{port}", origin=origin)
        for scheme, port in DEFAULT_PORTS.items()
        if scheme in installed
    ]
    adapter = None
    if "kahaDB" in registry.names("relaymq.persistence"):
        adapter = PluginElement("kahaDB", {"directory": str(Path(data) / "kahadb")}, origin=origin)
    return BrokerConfig(
        data_directory=data,
        transport_connectors=connectors,
        persistence_adapter=adapter,
        properties=props.as_dict(),
        source=DEFAULT_SOURCE,
    )
