"""Test support for RelayMQ users and plugin authors.

The pytest plugin (`relaymq.testing.pytest_plugin`, registered with pytest
automatically) gives the fixtures `broker` (an embedded, started broker with the
memory store) and `vm_connection` (a `relaymq.client.Connection` to it). Store
plugins reuse `relaymq.testing.store_conformance.StoreConformance`.
"""

from relaymq.testing.brokers import broker_config, host_port, plugin_element, running_broker
from relaymq.testing.net import free_port, free_port_below_ephemeral, is_listening, wait_listening
from relaymq.testing.waits import wait_equal, wait_equal_async, wait_until, wait_until_async

__all__ = ["broker_config", "free_port", "free_port_below_ephemeral", "host_port", "is_listening",
           "plugin_element", "running_broker", "wait_equal", "wait_equal_async", "wait_listening",
           "wait_until", "wait_until_async"]
