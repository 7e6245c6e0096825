"""Configuration errors name file:line; a missing plugin names its pip install."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from relaymq.config.model import PluginElement
from relaymq.errors import ConfigError
from relaymq.plugins import DESTINATION_INTERCEPTORS, PluginRegistry
from relaymq_virtual_topic import parse_interceptor


async def test_bad_selector_in_a_filtered_destination_names_file_and_line(start):
    with pytest.raises(ConfigError) as err:
        await start(['<compositeQueue name="Q"><forwardTo>',
                     '\n<filteredDestination selector="odd = " queue="FOO"/>',
                     "</forwardTo></compositeQueue>"])
    assert "activemq.xml:2" in str(err.value)
    assert "invalid selector" in str(err.value)


async def test_filtered_destination_needs_exactly_one_target(start):
    with pytest.raises(ConfigError, match="exactly one of queue"):
        await start(['<compositeQueue name="Q"><forwardTo>'
                     "<filteredDestination selector=\"a = 1\" queue=\"A\" topic=\"B\"/>"
                     "</forwardTo></compositeQueue>"])


async def test_forwarding_loops_are_refused(start):
    with pytest.raises(ConfigError, match="forwards to itself: queue://A -> queue://B -> queue://A"):
        await start(['<compositeQueue name="A"><forwardTo><queue physicalName="B"/></forwardTo>'
                     "</compositeQueue>",
                     '<compositeQueue name="B"><forwardTo><queue physicalName="A"/></forwardTo>'
                     "</compositeQueue>"])


async def test_a_bad_boolean_is_an_error(start):
    with pytest.raises(ConfigError, match=r'selectorAware="maybe"'):
        await start(['<virtualTopic name="VT.>" selectorAware="maybe"/>'])


async def test_unknown_attributes_warn_and_fail_under_strict(start, caplog):
    entry = '<virtualTopic name="VT.>" prefx="C.*."/>'
    with pytest.raises(ConfigError, match="prefx"):
        await start([entry], strict=True)
    caplog.set_level(logging.WARNING)
    broker = await start([entry], strict=False)
    assert broker.started
    assert any("prefx" in r.getMessage() and "did you mean prefix" in r.getMessage()
               for r in caplog.records)


async def test_empty_consumer_queue_names_are_refused(start):
    with pytest.raises(ConfigError, match="prefix and postfix are both empty"):
        await start(['<virtualTopic name="VT.>" prefix=""/>'])


def test_entries_may_sit_directly_in_the_interceptor():
    element = PluginElement("virtualDestinationInterceptor", children=[
        PluginElement("virtualTopic", {"name": "A.>"}),
        PluginElement("compositeTopic", {"name": "T"}, [PluginElement("forwardTo", children=[
            PluginElement("queue", {"physicalName": "Q"})])]),
    ])
    config = parse_interceptor(element)
    assert [t.name for t in config.topics] == ["A.>"]
    assert config.composites[0].kind == "topic"
    assert [str(t.destination) for t in config.composites[0].forward_to] == ["queue://Q"]


def test_defaults_match_activemq():
    config = parse_interceptor(PluginElement("virtualDestinationInterceptor", children=[
        PluginElement("virtualDestinations", children=[PluginElement("virtualTopic")])]))
    vt = config.topics[0]
    assert (vt.name, vt.prefix, vt.postfix) == (">", "Consumer.*.", "")
    assert (vt.selector_aware, vt.local, vt.concurrent_send, vt.transacted_send,
            vt.drop_on_resource_limit, vt.set_original_destination) == (
        False, False, False, False, False, True)


# -- plugin absence -----------------------------------------------------------------------------


def test_the_registry_names_the_distribution_to_install():
    message = PluginRegistry().not_found_message(DESTINATION_INTERCEPTORS,
                                                 "virtualDestinationInterceptor")
    assert "pip install relaymq-virtual-topic" in message


#: Runs Python with some distributions invisible to importlib.metadata (and so to
#: stevedore and the registry), as if they were not installed.
HIDE = textwrap.dedent("""
    import importlib.machinery, sys
    HIDDEN = set(sys.argv[1].split(","))
    _path_finder = importlib.machinery.PathFinder

    class _Hiding(_path_finder):
        @classmethod
        def find_distributions(cls, *args, **kwargs):
            for dist in _path_finder.find_distributions(*args, **kwargs):
                if (dist.metadata["Name"] or "").lower() not in HIDDEN:
                    yield dist

    sys.meta_path[:] = [_Hiding if f is _path_finder else f for f in sys.meta_path]
    del sys.argv[1]
""")


def run_without(dists: str, code: str, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    # stevedore caches entry points per sys.path: a cache of its own per view
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / f"cache-{dists}"))
    return subprocess.run([sys.executable, "-c", HIDE + textwrap.dedent(code), dists, *args],
                          capture_output=True, text=True, env=env, timeout=60)


ACTIVEMQ_XML = """\
<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
    <destinationInterceptors>
      <virtualDestinationInterceptor>
        <virtualDestinations><virtualTopic name=">"/></virtualDestinations>
      </virtualDestinationInterceptor>
    </destinationInterceptors>
  </broker>
</beans>
"""


def test_config_check_without_the_plugin_fails_with_the_install_hint(tmp_path):
    config = tmp_path / "activemq.xml"
    config.write_text(ACTIVEMQ_XML)
    done = run_without("relaymq-virtual-topic", """
        import sys
        from relaymq.cli import main
        sys.argv = ["relaymq", "config", "check", sys.argv[1]]
        main()
    """, str(config), tmp=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert f"<virtualDestinationInterceptor> at {config}:4" in out
    assert "pip install relaymq-virtual-topic" in out


def test_starting_a_broker_without_the_plugin_fails_with_the_install_hint(tmp_path):
    config = tmp_path / "activemq.xml"
    config.write_text(ACTIVEMQ_XML)
    done = run_without("relaymq-virtual-topic", """
        import asyncio, sys
        from relaymq.broker.broker import Broker
        from relaymq.config.loader import load_config
        from relaymq.errors import PluginNotFound
        try:
            asyncio.run(Broker(load_config(sys.argv[1])).start())
        except PluginNotFound as exc:
            print("NOT FOUND:", exc)
    """, str(config), tmp=tmp_path)
    assert "NOT FOUND: <virtualDestinationInterceptor>" in done.stdout, done.stderr
    assert "pip install relaymq-virtual-topic" in done.stdout


def test_without_the_plugin_there_is_no_virtual_topic_default(tmp_path):
    code = """
        import asyncio
        from relaymq.broker.broker import Broker
        from relaymq.client import connect_broker
        from relaymq.config.model import BrokerConfig
        from relaymq.testing.barriers import before_marker

        async def main():
            broker = Broker(BrokerConfig(persistent=False))
            await broker.start()
            conn = await connect_broker(broker)
            a = await conn.consumer("queue://Consumer.A.VirtualTopic.Orders")
            await conn.send("topic://VirtualTopic.Orders", "x")
            # a marker sent to the queue itself follows whatever the topic forwarded
            got = await before_marker(conn, "queue://Consumer.A.VirtualTopic.Orders", a)
            print("RECEIVED", len(got))
            await broker.stop()

        asyncio.run(main())
    """
    hidden = run_without("relaymq-virtual-topic", code, tmp=tmp_path)
    assert "RECEIVED 0" in hidden.stdout, hidden.stderr
    installed = run_without("nothing-hidden", code, tmp=tmp_path)
    assert "RECEIVED 1" in installed.stdout, installed.stderr
