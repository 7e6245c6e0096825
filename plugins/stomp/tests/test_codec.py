"""The sans-IO frame parser and encoder, with plain bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from relaymq_stomp.codec import FrameParser, Limits
from relaymq_stomp.errors import FrameError, ProtocolError
from relaymq_stomp.frames import V10, V11, V12, encode_frame, escape, unescape, unescape_headers

SEND = b"SEND\ndestination:/queue/a\ncontent-type:text/plain\nfoo:bar\n\nhello\x00"


def feed_all(data: bytes, chunk: int | None = None, limits: Limits | None = None):
    p = FrameParser(limits)
    out = []
    if chunk is None:
        out += p.feed(data)
    else:
        for i in range(0, len(data), chunk):
            out += p.feed(data[i:i + chunk])
    return p, out


def test_one_frame() -> None:
    _, frames = feed_all(SEND)
    assert len(frames) == 1
    f = frames[0]
    assert f.command == "SEND"
    assert f.headers == {"destination": "/queue/a", "content-type": "text/plain", "foo": "bar"}
    assert f.body == b"hello"
    assert not f.escaped
    assert f.size == len(SEND)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 16])
def test_split_anywhere(chunk: int) -> None:
    data = SEND + b"\n" + SEND + b"\r\n\n" + SEND
    p, frames = feed_all(data, chunk)
    assert [f.body for f in frames] == [b"hello"] * 3
    assert p.heartbeats == 3  # one per LF
    assert p.buffered == 0


def test_heartbeats_between_frames() -> None:
    p, frames = feed_all(b"\n\n\r\n" + SEND + b"\n")
    assert len(frames) == 1 and p.heartbeats == 4


def test_crlf_headers() -> None:
    data = b"SEND\r\ndestination:/queue/a\r\nx:1\r\n\r\nbody\x00"
    _, frames = feed_all(data)
    assert frames[0].headers == {"destination": "/queue/a", "x": "1"}
    assert frames[0].body == b"body"
    _, frames = feed_all(data, 1)
    assert frames[0].headers == {"destination": "/queue/a", "x": "1"}


def test_crlf_frame_whose_body_has_blank_lines() -> None:
    data = b"SEND\r\ndestination:/q\r\n\r\na\n\nb\x00"
    _, frames = feed_all(data)
    assert frames[0].body == b"a\n\nb"


def test_content_length_binary_body_with_nul() -> None:
    body = bytes(range(256)) * 4
    data = b"SEND\ndestination:/queue/b\ncontent-length:%d\n\n" % len(body) + body + b"\x00"
    for chunk in (None, 1, 100):
        _, frames = feed_all(data, chunk)
        assert frames[0].body == body


def test_repeated_header_first_wins() -> None:
    _, frames = feed_all(b"SEND\ndestination:/queue/a\nfoo:1\nfoo:2\n\n\x00")
    assert frames[0].headers["foo"] == "1"


def test_header_value_may_contain_colons() -> None:
    _, frames = feed_all(b"SEND\ndestination:/queue/a\nurl:http://x:80/\n\n\x00")
    assert frames[0].headers["url"] == "http://x:80/"


def test_empty_frame_without_headers() -> None:
    _, frames = feed_all(b"DISCONNECT\n\n\x00")
    assert frames[0].command == "DISCONNECT" and frames[0].headers == {}


def test_escaped_flag() -> None:
    _, frames = feed_all(b"SEND\ndestination:/queue/a\nk:a\\cb\n\n\x00")
    assert frames[0].escaped


@pytest.mark.parametrize("value", ["-1", "abc", "1e3", "", "12x", "\u0661"])
def test_bad_content_length(value: str) -> None:
    p = FrameParser()
    with pytest.raises(FrameError, match="content-length"):
        p.feed(b"SEND\ndestination:/q\ncontent-length:" + value.encode() + b"\n\nxyz\x00")
    assert p.broken
    assert p.feed(SEND) == []


@pytest.mark.parametrize("chunk", [None, 4096], ids=["in one read", "in pieces"])
def test_whole_frame_beyond_the_limits_without_content_length(chunk: int | None) -> None:
    """A frame whose NUL arrives in the same read as the rest is held to maxFrameSize
    and maxDataLength too (it used to be accepted when it came in one piece)."""
    frame = b"SEND\ndestination:/q\n\n" + b"x" * 5000 + b"\x00"
    for limits, says in ((Limits(max_frame_size=4000), "too large"),
                         (Limits(max_data_length=4000), "body too large")):
        p = FrameParser(limits)
        with pytest.raises(FrameError, match=says):
            step = chunk or len(frame)
            for i in range(0, len(frame), step):
                p.feed(frame[i:i + step])
        assert p.broken


def test_content_length_not_followed_by_nul() -> None:
    with pytest.raises(FrameError, match="bad content-length"):
        feed_all(b"SEND\ndestination:/q\ncontent-length:2\n\nabc\x00")


def test_frames_before_an_error_are_kept() -> None:
    p = FrameParser()
    with pytest.raises(FrameError):
        p.feed(SEND + b"SEND\nno colon here\n\n\x00")
    assert [f.command for f in p.error_frames] == ["SEND"]


def test_garbage_not_utf8() -> None:
    with pytest.raises(FrameError, match="garbage"):
        feed_all(b"\xff\xfe\xfd\n\n\x00")


def test_limits_header_count() -> None:
    lim = Limits(max_headers=3)
    feed_all(b"SEND\na:1\nb:2\nc:3\n\n\x00", limits=lim)
    with pytest.raises(FrameError, match="too many headers"):
        feed_all(b"SEND\na:1\nb:2\nc:3\nd:4\n\n\x00", limits=lim)
    with pytest.raises(FrameError, match="too many headers"):  # while still incomplete
        feed_all(b"SEND\na:1\nb:2\nc:3\nd:4\ne:5\n", limits=lim)


def test_limits_header_length() -> None:
    lim = Limits(max_header_length=20)
    with pytest.raises(FrameError, match="header too long"):
        feed_all(b"SEND\nk:" + b"x" * 30 + b"\n\n\x00", limits=lim)
    with pytest.raises(FrameError, match="too long"):  # incomplete, fed byte by byte
        feed_all(b"SEND\nk:" + b"x" * 30, chunk=1, limits=lim)


def test_limits_command_length() -> None:
    with pytest.raises(FrameError):
        feed_all(b"X" * 2000, chunk=100, limits=Limits(max_command_length=1024, max_header_length=1024))


def test_limits_body_with_content_length() -> None:
    lim = Limits(max_data_length=10)
    with pytest.raises(FrameError, match="too large"):
        FrameParser(lim).feed(b"SEND\ndestination:/q\ncontent-length:11\n\n")


def test_limits_body_without_content_length_is_bounded_while_buffering() -> None:
    lim = Limits(max_data_length=100, max_frame_size=200)
    p = FrameParser(lim)
    p.feed(b"SEND\ndestination:/q\n\n" + b"x" * 90)
    with pytest.raises(FrameError, match="too large"):
        p.feed(b"x" * 20)


def test_limits_frame_size() -> None:
    lim = Limits(max_data_length=1000, max_frame_size=100)
    with pytest.raises(FrameError, match="too large"):
        FrameParser(lim).feed(b"SEND\ndestination:/q\ncontent-length:200\n\n")


def test_incomplete_header_section_is_not_rescanned() -> None:
    p = FrameParser()
    data = b"SEND\n" + b"".join(b"h%d:v\n" % i for i in range(500))
    for i in range(0, len(data), 3):
        assert p.feed(data[i:i + 3]) == []
    frames = p.feed(b"\nbody\x00")
    assert len(frames) == 1 and len(frames[0].headers) == 500


def test_unescape_versions() -> None:
    assert unescape("a\\cb\\nc\\\\d", V11) == "a:b\nc\\d"
    assert unescape("a\\rb", V12) == "a\rb"
    assert unescape("a\\cb", V10) == "a\\cb"
    with pytest.raises(ProtocolError):
        unescape("a\\tb", V12)
    with pytest.raises(ProtocolError):
        unescape("trailing\\", V12)
    assert unescape_headers({"k\\c": "v\\n"}, V12) == {"k:": "v\n"}


def test_escape_round_trip() -> None:
    for v in ("plain", "a:b", "x\ny", "back\\slash", "cr\r"):
        assert unescape(escape(v, V12), V12) == v


def test_encode_frame() -> None:
    data = encode_frame("MESSAGE", {"a": "b:c"}, b"hi", V12)
    assert data == b"MESSAGE\na:b\\cc\ncontent-length:2\n\nhi\x00"
    assert encode_frame("CONNECTED", {"a": "b:c"}, b"", V12, content_length=False) == \
        b"CONNECTED\na:b:c\n\n\x00"
    _, frames = feed_all(data)
    assert frames[0].body == b"hi"


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                               min_size=1, max_size=8),
                       st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                               max_size=20), max_size=5),
       st.binary(max_size=300), st.integers(1, 50))
def test_round_trip_any_headers_and_body(headers: dict[str, str], body: bytes, chunk: int) -> None:
    headers.pop("content-length", None)
    data = encode_frame("SEND", headers, body, V12)
    p, frames = feed_all(data * 2, chunk)
    assert len(frames) == 2
    for f in frames:
        h = unescape_headers(f.headers, V12) if f.escaped else f.headers
        assert h.pop("content-length") == str(len(body))
        assert h == headers
        assert f.body == body


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_arbitrary_bytes_never_crash(data: bytes, chunk: int) -> None:
    p = FrameParser(Limits(max_headers=20, max_header_length=64, max_data_length=128,
                           max_frame_size=256))
    try:
        for i in range(0, len(data), chunk):
            p.feed(data[i:i + chunk])
    except FrameError:
        pass
    assert p.buffered <= 256 + 64


def test_unknown_command_refused_as_soon_as_its_line_ends() -> None:
    from relaymq_stomp.frames import CLIENT_COMMANDS

    p = FrameParser(commands=CLIENT_COMMANDS)
    with pytest.raises(FrameError, match="Unknown STOMP action: GET"):
        p.feed(b"GET / HTTP/1.1\r\nHost: x\r\n")
    p = FrameParser(commands=CLIENT_COMMANDS)
    with pytest.raises(FrameError, match="Unknown STOMP action"):
        p.feed(b"GET / HTTP/1.1\r\n\r\n")
    p = FrameParser(commands=CLIENT_COMMANDS)
    assert p.feed(b"SEN") == [] and p.feed(b"D\ndestination:/q\n") == []


def test_repeated_header_blocks_give_each_frame_its_own_headers() -> None:
    """A producer repeats its header block; every frame still gets a dict of its
    own (the session consumes it), and a changed block is parsed afresh."""
    send = b"SEND\ndestination:/queue/a\nk:v\n\nbody\x00"
    p = FrameParser(commands=frozenset({"SEND", "ACK"}))
    first, second = p.feed(send * 2)
    assert first.headers == second.headers == {"destination": "/queue/a", "k": "v"}
    first.headers.pop("destination")
    assert second.headers == {"destination": "/queue/a", "k": "v"}
    (third,) = p.feed(send)
    assert third.headers == {"destination": "/queue/a", "k": "v"}
    (other,) = p.feed(b"SEND\ndestination:/queue/b\n\nx\x00")
    assert other.headers == {"destination": "/queue/b"} and other.body == b"x"
    with pytest.raises(ProtocolError):
        p.feed(b"BOGUS\ndestination:/queue/b\n\nx\x00")
