"""The events links between two `relaymq run` brokers: a federation receiver
refused because its queue or address does not exist on the remote yet is
attached again when the remote announces that it was created (while the events
link is attached a refused receiver otherwise waits 30 s, longer than these
tests wait)."""

from __future__ import annotations

from fedtools import Brokers, client, connection_xml, receive_all, send, until_markers, wait_for_log

LOCAL_QUEUE = ('<federation><local-queue-policy name="work"><include queue-match="work.*"/>'
               '</local-queue-policy></federation>')
REMOTE_QUEUE = ('<federation><remote-queue-policy name="work"><include queue-match="work.*"/>'
                '</remote-queue-policy></federation>')
LOCAL_ADDRESS = ('<federation><local-address-policy name="news"><include address-match="news.#"/>'
                 '</local-address-policy></federation>')

#: no anonymous clients; "fed" (the federation's user: its consumers act as it) may
#: read news.# but not create it; "pub" creates and publishes
SECURED = """
<simpleAuthenticationPlugin anonymousAccessAllowed="false">
  <users><authenticationUser username="pub" password="pub" groups="apps"/>
    <authenticationUser username="fed" password="fed" groups="feds"/></users>
</simpleAuthenticationPlugin>
<authorizationPlugin><map><authorizationMap><authorizationEntries>
  <authorizationEntry topic="news.>" read="feds,apps" write="apps" admin="apps"/>
  <authorizationEntry topic="ActiveMQ.Advisory.>" read="feds,apps" write="feds,apps"
      admin="feds,apps"/>
</authorizationEntries></authorizationMap></map></authorizationPlugin>"""


def test_local_queue_policy_gets_its_receiver_when_the_remote_creates_the_queue(
        brokers: Brokers) -> None:
    brokers.start("a")
    brokers.start("b", connection_xml("a", brokers.port("a"), LOCAL_QUEUE))
    wait_for_log(brokers, "b", "federation to-a: events receiver attached")
    with client(brokers.url("b")) as cb:
        r = cb.create_receiver("queue://work.late", credit=10)
        wait_for_log(brokers, "b", "receiver for work.late not attached")  # A has no such queue
        send(brokers.url("a"), "queue://work.late", ["made it"])  # creates it on A
        assert receive_all(r, 1) == ["made it"]
    wait_for_log(brokers, "a", "telling the peer that queue work.late exists now")
    wait_for_log(brokers, "b", "the peer has queue work.late now; 1 receiver(s) attached again")


def test_remote_queue_policy_gets_its_receiver_when_the_queue_appears_on_the_sender(
        brokers: Brokers) -> None:
    # A asks B to pull work.* from A; B's receiver is refused until A has the queue,
    # and A announces it on its events sender
    brokers.start("b")
    brokers.start("a", connection_xml("b", brokers.port("b"), REMOTE_QUEUE))
    wait_for_log(brokers, "a", "federation to-b: events sender attached")
    with client(brokers.url("b")) as cb:
        r = cb.create_receiver("queue://work.late", credit=10)
        wait_for_log(brokers, "b", "receiver for work.late not attached")
        send(brokers.url("a"), "queue://work.late", ["made it"])
        assert receive_all(r, 1) == ["made it"]
    wait_for_log(brokers, "b", "the peer has queue work.late now; 1 receiver(s) attached again")


def test_address_receiver_waits_for_an_address_it_may_not_create(brokers: Brokers) -> None:
    brokers.start("a", plugins=SECURED)
    brokers.start("b", connection_xml("a", brokers.port("a"), LOCAL_ADDRESS, user="fed"))
    wait_for_log(brokers, "b", "federation to-a: events receiver attached")
    pub = {"user": "pub", "password": "pub", "allowed_mechs": "PLAIN"}
    with client(brokers.url("b")) as cb:
        sub = cb.create_receiver("topic://news.late", credit=10)
        # the federation's user may read news.late on A but not create it
        wait_for_log(brokers, "b", "receiver for news.late not attached")
        assert "address news.late does not exist" in brokers.procs["b"].output()
        send(brokers.url("a"), "topic://news.late", ["creates the address"], **pub)
        wait_for_log(brokers, "b", "the peer has address news.late now; 1 receiver(s) attached again")
        wait_for_log(brokers, "b", "receiver attached for news.late")
        send(brokers.url("a"), "topic://news.late", ["hello"], **pub)
        # the first message may come too: its producer made the topic, the
        # receiver can be there before the message is routed
        got = until_markers(sub, ["hello"])
        assert got in (["hello"], ["creates the address", "hello"])
