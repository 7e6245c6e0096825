"""Broker processes on a persistent store, for crash tests that run once per store:

    @pytest.fixture(params=STORES)
    def broker(tmp_path, request):
        b = StoreBrokerProcess(tmp_path, needs_store(request.param), "dups").start()
        yield b
        b.kill()

kahaDB (with checkpoints far apart, so a kill -9 leaves work for recovery) or the
JDBC store on SQLite (with a short lease: the restarted broker waits for the
killed one's lease to run out). STOMP and AMQP connectors on free ports.
"""

from __future__ import annotations

from pathlib import Path

from relaymq.testing.net import free_port
from relaymq.testing.processes import RelaymqProcess

#: the stores a crash test runs on, by name
STORES = ("kahadb", "jdbc")
#: the `<persistenceAdapter>` child of each, formatted with `tmp`
STORE_ADAPTERS = {
    "kahadb": '<kahaDB directory="{tmp}/kahadb" checkpointInterval="600000"/>',
    "jdbc": '<jdbcPersistenceAdapter url="sqlite:///{tmp}/store.sqlite" lockKeepAlivePeriod="300">'
            '<locker><lease-database-locker lockAcquireSleepInterval="1000"/></locker>'
            '</jdbcPersistenceAdapter>',
}
#: the plugin each store needs
STORE_PLUGINS = {"kahadb": "relaymq_kahadb", "jdbc": "relaymq_jdbc"}


def needs_store(store: str) -> str:
    """`store`, once its plugin is importable (the test skips otherwise: in CI, where
    every component is required, the skip fails the test)."""
    import pytest

    plugin = STORE_PLUGINS[store]
    pytest.importorskip(plugin, reason=f"{plugin.replace('_', '-')} is not installed")
    return store


class StoreBrokerProcess(RelaymqProcess):
    """`relaymq run` of a broker named `name` on `store`, with a STOMP (`stomp`) and an
    AMQP (`amqp`) connector; `attributes` go on `<broker>`, `body` (other children,
    such as a destinationPolicy) in it verbatim. `start` returns it once both listen."""

    def __init__(self, tmp: Path, store: str = "kahadb", name: str = "broker", *,
                 attributes: str = "", body: str = "") -> None:
        self.tmp = tmp
        self.store = store
        self.stomp = free_port()
        self.amqp = free_port()
        config = tmp / "activemq.xml"
        config.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="{name}" dataDirectory="{tmp}" {attributes}>
  {body}
  <persistenceAdapter>{STORE_ADAPTERS[store].format(tmp=tmp)}</persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.amqp}"/>
  </transportConnectors>
</broker></beans>""")
        super().__init__(config, tmp / "broker.log", [self.stomp, self.amqp])

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> StoreBrokerProcess:
        super().start(wait=wait, timeout=timeout)
        return self
