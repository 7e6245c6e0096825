"""The peer side's queue behind an address receiver: a durable subscription.

As Artemis does, the messages for a peer's address receiver collect in a
durable subscription (Artemis: a durable multicast queue) named after the
receiver's FQQN queue part,
``federation.<federation>.policy.<policy>.address.<address>.node.<peer node>``
(the link name for a version 1 peer), under the client id
``$federation:<peer node>``. It outlives the link:

* the peer **closes** the link (its demand went, or it stopped): the
  subscription is deleted with whatever it still holds;
* the link **goes away without a close** (a detach, the connection dropped, the
  peer crashed): the subscription stays and keeps collecting, and the peer's
  next receiver for that address (same name: the node id is stable) gets what
  was published meanwhile. With ``auto-delete`` (link property
  ``federated-address-source-properties``) it is deleted once it has had no
  consumer for ``auto-delete-delay`` ms, provided it holds no more than
  ``auto-delete-msg-count`` messages (-1: any number).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from relaymq_federation import wire

log = logging.getLogger("relaymq.federation")

#: (client id, name) -> the pending auto-delete of a subscription left without its link
_AUTO_DELETE: dict[tuple[str, str], asyncio.TimerHandle] = {}


def client_id_for(remote: str | None) -> str:
    return f"{wire.FEDERATION_PREFIX}:{remote or 'unknown'}"


def origin_of(client_id: str) -> str | None:
    """The peer node a subscription made by `client_id_for` is for (None: not one)."""
    prefix = f"{wire.FEDERATION_PREFIX}:"
    return client_id[len(prefix):] if client_id.startswith(prefix) else None


def subscription_name(link_name: str, source_address: str) -> str:
    """The FQQN's queue part; a version 1 peer (a plain address) gets the link name."""
    _, queue = wire.split_fqqn(source_address)
    return queue or link_name


def settings(remote_properties: dict[str, Any]) -> tuple[bool, int, int]:
    """(auto-delete, auto-delete-delay ms, auto-delete-msg-count) of the link."""
    props = remote_properties.get(wire.ADDRESS_SOURCE_PROPERTIES)
    if not isinstance(props, dict):
        return False, 0, 0
    props = {str(k): v for k, v in props.items()}
    auto = props.get("auto-delete", False)
    delay = props.get("auto-delete-delay", 0)
    count = props.get("auto-delete-msg-count", 0)
    return (auto is True, int(delay) if isinstance(delay, int) else 0,
            int(count) if isinstance(count, int) else 0)


def attached(client_id: str, name: str) -> None:
    """A receiver is back for the subscription: it is not deleted."""
    timer = _AUTO_DELETE.pop((client_id, name), None)
    if timer is not None:
        timer.cancel()


def link_closed(broker: Any, client_id: str, name: str) -> None:
    """The peer closed its receiver: no more demand, the subscription goes."""
    attached(client_id, name)
    asyncio.get_running_loop().create_task(_delete(broker, client_id, name, None))


def link_lost(broker: Any, client_id: str, name: str, remote_properties: dict[str, Any]) -> None:
    """The receiver went away without a close: the subscription stays (and is
    auto-deleted later when the link asked for it)."""
    auto, delay, count = settings(remote_properties)
    if not auto:
        return
    attached(client_id, name)
    loop = asyncio.get_running_loop()
    _AUTO_DELETE[(client_id, name)] = loop.call_later(
        max(delay, 0) / 1000.0,
        lambda: (_AUTO_DELETE.pop((client_id, name), None),
                 loop.create_task(_delete(broker, client_id, name, count))))


async def _delete(broker: Any, client_id: str, name: str, max_count: int | None) -> None:
    management = broker.management
    info = management.durable_subscription(client_id, name)
    if info is None or info.active:
        return
    if max_count is not None and max_count >= 0 and info.depth > max_count:
        log.info("federation subscription %s kept: %d messages (auto-delete-msg-count %d)",
                 name, info.depth, max_count)
        return
    try:
        await management.delete_durable_subscription(client_id, name)
    except Exception as exc:  # noqa: BLE001 - a consumer came back meanwhile
        log.info("federation subscription %s not deleted: %s", name, exc)
        return
    log.info("federation subscription %s deleted", name)
