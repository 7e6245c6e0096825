"""Header mapping without sockets: SEND headers -> Message -> MESSAGE block."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from relaymq.dispatch.deadletter import ORIGINAL_DESTINATION, ORIGINAL_EXPIRATION
from relaymq.model.destination import Destination
from relaymq.model.message import MESSAGE_FIELDS, Message
from relaymq_stomp.destinations import DestinationMapper
from relaymq_stomp.frames import V10, V11, V12
from relaymq_stomp.mapping import (
    _GENERATED,
    AMQ_MSG_TYPE,
    RESERVED,
    SendCache,
    _render,
    message_from_send,
    render_block,
)

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
#: names the mapping treats specially: SEND headers that are not properties, MESSAGE
#: headers the broker writes itself, the body-type switch, and a few plain names that
#: look like fields (drawn often, so every run covers the collisions)
SPECIAL = sorted(RESERVED | _GENERATED | {AMQ_MSG_TYPE, "extra", "body", "properties"})
random_name = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                      min_size=1, max_size=24)
name = st.one_of(st.sampled_from(SPECIAL), random_name)
#: what a SEND header can be to become a property: not a reserved header, not
#: `amq-msg-type` (whose value must be text or bytes); broker-generated names a SEND does
#: not consume (`original-destination`, ...) are drawn: they stay properties, not echoed
NOT_PROPERTIES = RESERVED | {AMQ_MSG_TYPE}
property_name = name.filter(lambda k: k not in NOT_PROPERTIES)
value = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())


class _Conn:
    id = "ID:test-1-1-1:1"


@settings(max_examples=300, deadline=None)
@given(props=st.dictionaries(name, value, max_size=4), corr=st.none() | text,
       mtype=st.none() | text, ctype=st.none() | text, durable=st.booleans(),
       dlq=st.booleans(), mid=st.sampled_from(["ID:h-1-2-1:3:-1:1:42", "plain", "a:b\\c\nd"]))
def test_fast_block_equals_reference(props, corr, mtype, ctype, durable, dlq, mid) -> None:
    m = Message(b"body", destination=Destination.queue("q"), message_id=mid, durable=durable,
                correlation_id=corr, type=mtype, content_type=ctype, properties=props,
                reply_to=Destination.topic("r:x"), timestamp=5, expiration=7,
                annotations={ORIGINAL_DESTINATION: "queue://A", ORIGINAL_EXPIRATION: 9} if dlq else None)
    assert render_block(m, V12) == _render(m, V12)
    for v in (V10, V11):
        assert render_block(m, v) == _render(m, v)


def test_send_mapping_consumes_reserved_headers() -> None:
    mapper = DestinationMapper(_Conn())  # type: ignore[arg-type]
    h = {"destination": "/topic/t", "persistent": "TRUE", "priority": "12", "expires": "99",
         "type": "x", "correlation-id": "c", "reply-to": "/queue/r", "JMSXGroupID": "g",
         "JMSXGroupSeq": "2", "AMQ_SCHEDULED_DELAY": "5", "content-type": "text/plain",
         "content-length": "4", "color": "red"}
    m = message_from_send(h, b"body", mapper, "ID:x:1", 123)
    assert m.destination == Destination.topic("t")
    assert m.durable and m.priority == 9 and m.expiration == 99 and m.type == "x"
    assert m.correlation_id == "c" and m.reply_to == Destination.queue("r")
    assert m.group_id == "g" and m.group_seq == 2 and m.scheduled_delay == 5
    assert m.content_type == "text/plain" and m.body_type == "bytes"
    assert m.properties == {"color": "red"}
    assert m.encoding == "stomp"
    assert sorted(m.encoded.split(b"\n")) == sorted(render_block(m).split(b"\n"))


@settings(max_examples=300, deadline=None)
@given(props=st.dictionaries(property_name, text, max_size=4),
       corr=st.none() | text, mtype=st.none() | text, ctype=st.none() | text,
       durable=st.booleans())
def test_send_block_equals_reference(props, corr, mtype, ctype, durable) -> None:
    h = dict(props, destination="/queue/q")
    for k, v in (("correlation-id", corr), ("type", mtype), ("content-type", ctype)):
        if v is not None:
            h[k] = v
    if durable:
        h["persistent"] = "true"
    clean = not any(c in "".join(h) + "".join(h.values()) for c in "\\\r\n")
    m = message_from_send(h, b"b", DestinationMapper(_Conn()), "ID:h-1-2-1:3:-1:1:42", 77,  # type: ignore[arg-type]
                          clean=clean)
    assert sorted(m.encoded.split(b"\n")) == sorted(_render(m, V12).split(b"\n"))


def test_destination_objects_are_shared() -> None:
    a = DestinationMapper(_Conn())  # type: ignore[arg-type]
    b = DestinationMapper(_Conn())  # type: ignore[arg-type]
    assert a.parse("/queue/same") is b.parse("/queue/same")
    assert a.parse("/queue/x,/topic/y") == Destination.queue("x,topic://y")


_CACHE_FIELDS = [s for s in MESSAGE_FIELDS if s not in ("message_id", "timestamp", "encoded")]


# properties only: a reserved header (expires, priority, ...) with random text is a bad SEND
@given(props=st.dictionaries(property_name, text, max_size=3),
       durable=st.booleans(), corr=st.none() | text, group=st.booleans())
def test_repeated_send_headers_make_the_same_message_as_fresh_ones(props, durable, corr,
                                                                   group) -> None:
    """With the per-connection cache a SEND that repeats the previous headers
    makes exactly the message an uncached mapping makes (but its own id,
    timestamp and properties dict)."""
    mapper = DestinationMapper(_Conn())  # type: ignore[arg-type]
    headers = {"destination": "/queue/q", "content-type": "text/plain", **props}
    if durable:
        headers["persistent"] = "true"
    if corr is not None:
        headers["correlation-id"] = corr
    if group:
        headers["JMSXGroupID"] = "g"
    cache = SendCache()
    made = [message_from_send(dict(headers), b"b%d" % i, mapper, f"ID:c:{i}", 100 + i,
                              f"ID\\cc\\c{i}", True, cache) for i in range(3)]
    fresh = [message_from_send(dict(headers), b"b%d" % i, mapper, f"ID:c:{i}", 100 + i,
                               f"ID\\cc\\c{i}", True) for i in range(3)]
    for a, b in zip(made, fresh, strict=True):
        assert {f: getattr(a, f) for f in _CACHE_FIELDS} == {f: getattr(b, f) for f in _CACHE_FIELDS}
        assert (a.message_id, a.timestamp, a.encoded) == (b.message_id, b.timestamp, b.encoded)
    # each message has its own properties dict: changing one leaves the next as made (a
    # value longer than `text` draws, so a drawn "extra" cannot already hold it)
    made[1].properties["extra"] = "changed by the test"
    assert made[2].properties == fresh[2].properties == props
    other = message_from_send({"destination": "/queue/q", "priority": "7"}, b"z", mapper,
                              "ID:c:9", 9, "ID\\cc\\c9", True, cache)
    assert other.priority == 7 and other.content_type is None and other.properties == {}
