"""The <federation> model from XML and YAML, Artemis wildcards, policy maps
(the control link's commands) and hop counting on AMQP bytes."""

from __future__ import annotations

import proton
import pytest
from relaymq.config import load_config_text
from relaymq.errors import ConfigError
from relaymq_federation.config import AddressPolicy, QueuePolicy, federation_config
from relaymq_federation.hops import HOPS, add_hop, hops_of, max_hops_selector, split_selector
from relaymq_federation.matching import Matcher, from_activemq, matches

XML = """<broker brokerName="a"><broker-connections>
  <amqp-connection uri="tcp://hub:5672" name="to-hub">
    <federation>
      <local-address-policy name="news" max-hops="2" auto-delete="true"
          auto-delete-delay="60000" auto-delete-message-count="-1" enable-divert-bindings="false">
        <include address-match="news.#"/> <exclude address-match="news.internal.#"/>
      </local-address-policy>
      <local-queue-policy name="work" priority-adjustment="-2" include-federated="true">
        <include address-match="#" queue-match="work.*"/>
      </local-queue-policy>
      <remote-address-policy name="back" max-hops="1"><include address-match="back.#"/></remote-address-policy>
      <property key="addressReceiverIdleTimeout" value="500"/>
    </federation>
    <sender address-match="outbound.#"/> <receiver queue-name="inbound"/> <peer address-match="shared.#"/>
  </amqp-connection>
</broker-connections></broker>"""

YAML = """broker:
  brokerName: a
  broker-connections:
    - amqp-connection:
        uri: tcp://hub:5672
        name: to-hub
        federation:
          policies:
            - local-address-policy:
                name: news
                max-hops: 2
                auto-delete: true
                auto-delete-delay: 60000
                auto-delete-message-count: -1
                enable-divert-bindings: false
                matches:
                  - include: {address-match: "news.#"}
                  - exclude: {address-match: "news.internal.#"}
            - local-queue-policy:
                name: work
                priority-adjustment: -2
                include-federated: true
                include: {address-match: "#", queue-match: "work.*"}
            - remote-address-policy:
                name: back
                max-hops: 1
                include: {address-match: "back.#"}
          property: {key: addressReceiverIdleTimeout, value: 500}
"""


def _federation(text: str, fmt: str):  # type: ignore[no-untyped-def]
    config = load_config_text(text, fmt)
    (conn,) = config.broker_connections
    fed = next(c for c in conn.children if c.tag == "federation")
    return federation_config(fed, "to-hub"), [c.tag for c in conn.children]


def test_xml_model() -> None:
    cfg, tags = _federation(XML, "xml")
    assert tags == ["federation", "sender", "receiver", "peer"]
    assert cfg.name == "to-hub"
    (news,) = cfg.local_address_policies
    assert (news.name, news.max_hops, news.auto_delete, news.auto_delete_delay,
            news.auto_delete_message_count) == ("news", 2, True, 60000, -1)
    assert news.selects("news.eu") and news.selects("news") and not news.selects("news.internal.x")
    (work,) = cfg.local_queue_policies
    assert (work.priority_adjustment, work.include_federated) == (-2, True)
    assert work.selects("work.1", "work.1") and not work.selects("work.1.x", "work.1.x")
    assert cfg.remote_address_policies[0].max_hops == 1
    assert cfg.setting("addressReceiverIdleTimeout") == 500
    assert cfg.setting("queueReceiverIdleTimeout") == 60000


def test_configuration_map_is_typed_as_artemis_sends_it() -> None:
    cfg, _ = _federation(XML.replace(
        '<property key="addressReceiverIdleTimeout" value="500"/>',
        '<property key="addressReceiverIdleTimeout" value="500"/>'
        '<property key="ignoreQueueConsumerFilters" value="true"/>'), "xml")
    m = cfg.to_configuration_map()
    assert m["addressReceiverIdleTimeout"] == 500 and m["amqpCredits"] == 1000
    assert m["ignoreQueueConsumerFilters"] is True and m["ignoreQueueConsumerPriorities"] is True
    assert m["tunnel-core-messages"] is False


def test_yaml_gives_the_same_model() -> None:
    assert _federation(YAML, "yaml")[0] == _federation(XML, "xml")[0]


def test_queue_policy_defaults_are_artemis() -> None:
    cfg, _ = _federation("""<broker><broker-connections><amqp-connection uri="tcp://h:1">
      <federation><local-queue-policy name="q"><include queue-match="a"/></local-queue-policy>
      <local-address-policy name="x"><include address-match="x"/></local-address-policy></federation>
      </amqp-connection></broker-connections></broker>""", "xml")
    assert cfg.local_queue_policies[0].priority_adjustment == -1
    assert cfg.local_queue_policies[0].include_federated is False
    assert cfg.local_address_policies[0].max_hops == 0


@pytest.mark.parametrize("bad, why", [
    ('<local-address-policy max-hops="1"/>', "needs a name"),
    ('<local-address-policy name="p" max-hops="many"/>', "not a whole number"),
    ('<local-address-policy name="p" max-hops="-1"/>', "max-hops"),
    ('<local-queue-policy name="q" include-federated="maybe"/>', "not a boolean"),
    ('<remote-thing name="z"/>', "not a federation element"),
])
def test_bad_configuration_is_refused_with_the_reason(bad: str, why: str) -> None:
    text = (f'<broker><broker-connections><amqp-connection uri="tcp://h:1"><federation>{bad}'
            '</federation></amqp-connection></broker-connections></broker>')
    with pytest.raises(ConfigError, match=why):
        _federation(text, "xml")


@pytest.mark.parametrize("pattern, name, hit", [
    ("news.#", "news", True), ("news.#", "news.eu.sport", True), ("news.#", "newsx", False),
    ("news.*", "news.eu", True), ("news.*", "news", False), ("news.*", "news.eu.x", False),
    ("#.eu", "a.b.eu", True), ("#.eu", "eu", True), ("a.#.z", "a.z", True),
    ("a.#.z", "a.b.c.z", True), ("a.#.z", "a.bz", False), ("#", "anything.at.all", True),
    ("a.b", "a.b", True), ("a.b", "a.bc", False), ("a+b.c", "a+b.c", True),
])
def test_artemis_wildcards(pattern: str, name: str, hit: bool) -> None:
    assert matches(pattern, name) is hit


def test_activemq_wildcards_translate() -> None:
    assert from_activemq("news.>") == "news.*.#"
    assert matches(from_activemq("news.>"), "news.eu") and not matches(from_activemq("news.>"), "news")
    m = Matcher(["a.#"], ["a.secret.#"])
    assert m("a.b") and not m("a.secret.c") and not m("b")


def test_policy_maps_round_trip() -> None:
    a = AddressPolicy("p", ["a.#"], ["a.x"], 3, True, 10, 5, False, {"k": "v"})
    assert AddressPolicy.from_map(a.to_map()) == a
    q = QueuePolicy("q", [("#", "work.*")], [("#", "work.secret")], -3, True)
    assert QueuePolicy.from_map(q.to_map()) == q


@pytest.mark.parametrize("m, why", [
    ({"max-hops": 1}, "policy-name"),
    ({"policy-name": "p"}, "max-hops"),
    ("not a map", "map"),
])
def test_address_policy_map_errors(m: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        AddressPolicy.from_map(m)


def test_queue_policy_map_needs_a_name() -> None:
    with pytest.raises(ValueError, match="policy-name"):
        QueuePolicy.from_map({"priority-adjustment": 1})


def test_hops_are_counted_in_the_message_annotations() -> None:
    m = proton.Message(body="hi", durable=True, properties={"a": 1})
    m.annotations = {"x-opt-other": "kept"}
    once, n1 = add_hop(m.encode())
    twice, n2 = add_hop(once)
    assert (n1, n2, hops_of(m.encode()), hops_of(twice)) == (1, 2, 0, 2)
    back = proton.Message()
    back.decode(twice)
    assert back.body == "hi" and back.properties == {"a": 1} and back.durable
    assert back.annotations[HOPS] == 2 and back.annotations["x-opt-other"] == "kept"
    bare, _ = add_hop(proton.Message(body=b"raw").encode())
    back.decode(bare)
    assert back.annotations == {HOPS: 1} and bytes(back.body) == b"raw"


def test_max_hops_selector_is_artemis_and_is_split_off() -> None:
    sel = max_hops_selector(2)
    assert sel == ('(("m.x-opt-amq-fed-hops" IS NULL OR "m.x-opt-amq-fed-hops"<2) AND '
                   '(_AMQ_Fed_Hops IS NULL OR _AMQ_Fed_Hops<2))')
    assert split_selector(sel) == (2, None)
    assert split_selector(sel + " AND (region = 'eu')") == (2, "region = 'eu'")
    assert split_selector("region = 'eu'") == (0, "region = 'eu'")
    assert split_selector(None) == (0, None)
