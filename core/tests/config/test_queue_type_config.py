"""`queueType` on <policyEntry> and on a declared <queue>, in XML and YAML alike."""

from __future__ import annotations

import pytest
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.errors import PluginNotFound
from relaymq.model.destination import Destination

XML = """<broker persistent="false">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="PRICES.>" queueType="standard"/>
  </policyEntries></policyMap></destinationPolicy>
  <destinations><queue physicalName="LATEST" queueType="standard"/><topic physicalName="T"/></destinations>
</broker>"""

YAML = """broker:
  persistent: false
  destinationPolicy:
    policyMap:
      policyEntries:
        - policyEntry: {queue: "PRICES.>", queueType: standard}
  destinations:
    - queue: {physicalName: LATEST, queueType: standard}
    - topic: {physicalName: T}
"""


def test_xml_and_yaml_give_the_same_queue_types() -> None:
    xml, yaml = load_config_text(XML, "xml"), load_config_text(YAML, "yaml")
    assert xml.policy_entries[0].queue_type == yaml.policy_entries[0].queue_type == "standard"
    assert [d.queue_type for d in xml.destinations] == ["standard", None]
    assert [d.queue_type for d in yaml.destinations] == ["standard", None]
    assert [(n, o.line > 0) for n, o in xml.queue_type_uses()] == [("standard", True)] * 2


def test_queue_type_on_a_topic_declaration_is_reported() -> None:
    config = load_config_text('<broker><destinations><topic physicalName="T" queueType="x"/>'
                              '</destinations></broker>', "xml")
    assert any("queueType" in w for w in config.warnings)
    assert config.destinations[0].queue_type is None


async def test_the_broker_makes_queues_of_their_type_and_refuses_unknown_ones() -> None:
    broker = Broker(load_config_text(XML, "xml"))
    await broker.start()
    try:
        info = await broker.management.destination("LATEST")
        assert info.queue_type == "standard"
        made = await broker.management.create_queue("PRICES.A")
        assert made.queue_type == "standard"
        assert broker.management.queue(Destination.queue("PRICES.A")).queue_type == "standard"
    finally:
        await broker.stop()
    bad = Broker(load_config_text(XML.replace('queueType="standard"/>\n  </policyEntries>',
                                              'queueType="nope"/>\n  </policyEntries>'), "xml"))
    with pytest.raises(PluginNotFound, match="queueType=\"nope\" at .* needs a queue type named"):
        await bad.start()


def test_a_temp_queue_entry_applies_to_every_temporary_queue_and_only_to_them() -> None:
    from relaymq.dispatch.policy import PolicyMap
    from relaymq.model.destination import DestinationKind

    for text, fmt in (
        ('<broker><destinationPolicy><policyMap><policyEntries>'
         '<policyEntry queue=">" queuePrefetch="7"/>'
         '<policyEntry tempQueue="true" queuePrefetch="3" anonymousQueueGrace="500"/>'
         '</policyEntries></policyMap></destinationPolicy>'
         '<destinations><queue physicalName="Q" topicSubscriptions="a.b, c.>"/></destinations>'
         '</broker>', "xml"),
        ("broker:\n  destinationPolicy:\n    policyMap:\n      policyEntries:\n"
         "        - policyEntry: {queue: '>', queuePrefetch: 7}\n"
         "        - policyEntry: {tempQueue: true, queuePrefetch: 3, anonymousQueueGrace: 500}\n"
         "  destinations:\n    - queue: {physicalName: Q, topicSubscriptions: 'a.b, c.>'}\n",
         "yaml"),
    ):
        config = load_config_text(text, fmt, strict=True)
        policies = PolicyMap(config.policy_entries)
        temp = policies.entry_for(Destination(DestinationKind.TEMP_QUEUE, "ID:c1:1"))
        assert (temp.queue_prefetch, temp.anonymous_queue_grace) == (3, 500)
        assert policies.entry_for(Destination.queue("ORDERS")).queue_prefetch == 7
        assert config.destinations[0].topic_subscriptions == "a.b, c.>"
