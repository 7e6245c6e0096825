"""Link capabilities, which proton 0.40's engine drops.

The AMQP ``attach`` performative carries ``offered-capabilities`` and
``desired-capabilities`` (fields 11 and 12, counted from 0: after
``max-message-size``, before ``properties``). Proton's C engine neither keeps
the peer's nor sends ours, yet broker-to-broker links are told apart by them
(Artemis' mirror desires ``amq.mirror``; its federation links desire
``AMQ_FEDERATION_CONTROL_LINK`` and friends). So:

* incoming: `frames.FrameGuard` decodes every control frame anyway; for an
  attach that carries capabilities it records them (`read_attach`) under the
  link's name and the peer's role, where `connection.AmqpConnection` and the
  outgoing connection pick them up when proton reports the link;
* outgoing: a link that must offer or desire capabilities registers them in
  its engine's `attach_patches` (by link name) before it opens; the engine
  rewrites that link's attach in its output (`patch_attaches`) and forgets the
  patch. Only attach frames are touched, only while a patch waits: ordinary
  traffic never comes here.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from relaymq_amqp.encode import encode, symbol_array
from relaymq_amqp.scanner import skip

log = logging.getLogger("relaymq.amqp")

ATTACH = 0x12
#: the attach fields of the capabilities (AMQP 1.0 section 2.7.3)
OFFERED = 11
DESIRED = 12
_HEADER = struct.Struct(">IBBH")
_U32 = struct.Struct(">I")

#: (offered, desired) capabilities to put on a link's attach (None: leave as is)
Patch = tuple[list[str] | None, list[str] | None]


def symbols(value: Any) -> list[str]:
    """Capabilities as a list of strings (a single symbol or an array of them)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [str(value)]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return []


def read_attach(fields: Any) -> tuple[str, bool, list[str], list[str]] | None:
    """(name, role, offered, desired) of a decoded attach field list; None when
    it carries no capabilities (nothing worth keeping). `role` True: the peer's
    end receives."""
    if not isinstance(fields, list) or len(fields) <= OFFERED:
        return None
    offered = symbols(fields[OFFERED])
    desired = symbols(fields[DESIRED]) if len(fields) > DESIRED else []
    if not offered and not desired:
        return None
    name = fields[0]
    if not isinstance(name, str):
        return None
    return str(name), bool(fields[2]) if len(fields) > 2 else False, offered, desired


def _list_items(data: bytes, pos: int) -> tuple[list[bytes], int]:
    """The encoded items of the list at `pos` and the position after it."""
    code = data[pos]
    if code == 0x45:
        return [], pos + 1
    if code == 0xC0:
        size, count, p = data[pos + 1], data[pos + 2], pos + 3
        end = pos + 2 + size
    elif code == 0xD0:
        size = _U32.unpack_from(data, pos + 1)[0]
        count = _U32.unpack_from(data, pos + 5)[0]
        p, end = pos + 9, pos + 5 + size
    else:
        raise ValueError(f"not a list: 0x{code:02x}")
    items = []
    for _ in range(count):
        q = skip(data, p)
        items.append(bytes(data[p:q]))
        p = q
    return items, end


def _encode_list(items: list[bytes]) -> bytes:
    body = b"".join(items)
    return b"\xd0" + _U32.pack(len(body) + 4) + _U32.pack(len(items)) + body


def _caps(names: list[str]) -> bytes:
    if not names:
        return b"\x40"
    return encode(symbol_array(names))


def _patched_frame(frame: bytes, patches: dict[str, Patch]) -> bytes | None:
    """The frame with its attach's capabilities replaced, or None when it is not
    an attach of a patched link."""
    size, doff, ftype, channel = _HEADER.unpack_from(frame, 0)
    body = doff * 4
    if ftype != 0 or len(frame) <= body + 3 or frame[body] != 0:
        return None
    if frame[body + 1] == 0x53:
        code, lst = frame[body + 2], body + 3
    elif frame[body + 1] == 0x80:
        code, lst = int.from_bytes(frame[body + 2:body + 10], "big"), body + 10
    else:
        return None
    if code != ATTACH:
        return None
    items, end = _list_items(frame, lst)
    if not items:
        return None
    from relaymq_amqp.scanner import decode

    name = decode(items[0])[0]
    patch = patches.pop(str(name), None) if isinstance(name, str) else None
    if patch is None:
        return None
    offered, desired = patch
    while len(items) <= DESIRED:
        items.append(b"\x40")
    if offered is not None:
        items[OFFERED] = _caps(offered)
    if desired is not None:
        items[DESIRED] = _caps(desired)
    new_body = frame[body:lst] + _encode_list(items) + frame[end:]
    head = frame[8:body]
    return _HEADER.pack(8 + len(head) + len(new_body), doff, ftype, channel) + head + new_body


def patch_attaches(out: bytes, patches: dict[str, Patch]) -> bytes:
    """`out` (whole frames, as proton writes them) with the attach frames of
    patched links rewritten; each patch is used once."""
    pieces: list[bytes] = []
    pos = 0
    n = len(out)
    changed = False
    if out[:4] == b"AMQP":
        pieces.append(out[:8])
        pos = 8
    while pos + 8 <= n and patches:
        size = _HEADER.unpack_from(out, pos)[0]
        if size < 8 or pos + size > n:
            break  # not whole frames (the protocol header, or a split): leave the rest
        frame = out[pos:pos + size]
        try:
            new = _patched_frame(frame, patches)
        except Exception:  # noqa: BLE001 - never break the output over a patch
            log.exception("could not add link capabilities to an attach frame")
            new = None
        if new is not None:
            changed = True
            pieces.append(new)
        else:
            pieces.append(frame)
        pos += size
    if not changed:
        return out
    pieces.append(out[pos:])
    return b"".join(pieces)
