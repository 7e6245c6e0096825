"""The OpenAPI 3.0 document of /api/v1 (served at /api/v1/openapi.json)."""

from __future__ import annotations

from typing import Any

from relaymq_console.views import SORTABLE

_ERROR = {"description": "error", "content": {"application/json": {"schema": {
    "type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}}}}
_OBJ = {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}
#: a destination name has something besides white space (the broker strips it)
_VISIBLE = "[^\\s\\x1c-\\x1f\\x85\\xa0]"
_NAME = {"name": "name", "in": "path", "required": True,
         "schema": {"type": "string", "pattern": _VISIBLE}}
#: a name send cannot deliver to: several queues (`,`) or a wildcard segment (400)
_WILD_OR_SEVERAL = "[,]|(^|[.])[*>#]([.]|$)"
_SEND_TO = {**_NAME, "schema": {"type": "string", "pattern": _VISIBLE,
                                "not": {"pattern": _WILD_OR_SEVERAL}}}
#: a name that is not one plain queue to create (400): several, a wildcard, another
#: kind of destination, or `queue://` and nothing more
_NOT_ONE_QUEUE = ("[,]|(^|[.]|^queue://)[*>#]([.]|$)|^(topic|temp-queue|temp-topic)://"
                  "|^queue://[\\s\\x1c-\\x1f\\x85\\xa0]*$")
_BRIDGE = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
#: a JMS (SQL-92) message selector, as ActiveMQ takes them; the broker refuses a
#: malformed one with 400
_SELECTOR = {"type": "string", "format": "jms-selector"}
_EITHER = [{"required": ["message_ids"]}, {"required": ["selector"]}]
_SELECT_PROPS: dict[str, Any] = {
    "message_ids": {"type": "array", "items": {"type": "string"}},
    "selector": _SELECTOR}
_SELECT = {"type": "object", "anyOf": _EITHER, "properties": _SELECT_PROPS}
#: one plain queue: not several (`,`), no wildcard segment, no other scheme than queue://
_NOT_PLAIN = "[,]|(^|[.])[*>#]([.]|$)|^(?!queue://)[A-Za-z+.-]*://|^queue://$|://.*://"
_MOVE = {"type": "object", "required": ["to"], "anyOf": _EITHER, "properties": {
    "to": {"type": "string", "pattern": _VISIBLE, "not": {"pattern": _NOT_PLAIN}},
    **_SELECT_PROPS}}
#: a property value: text, a 64-bit integer, a finite number or a boolean
_SCALAR = {"anyOf": [{"type": "string"},
                     {"type": "integer", "minimum": -2**63, "maximum": 2**63 - 1},
                     {"type": "number", "not": {"type": "integer"}},
                     {"type": "boolean"}]}


def _op(summary: str, *, params: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None, conflict: bool = False) -> dict[str, Any]:
    """An operation answering 200, or 400 (bad input), 401, 403, 404 (no such thing),
    429 (a blocked login) and, with `conflict`, 409 (the broker's state refuses it)."""
    op: dict[str, Any] = {"summary": summary, "parameters": params or [],
                          "responses": {"200": _OBJ, "400": _ERROR, "401": _ERROR,
                                        "403": _ERROR, "404": _ERROR, "429": _ERROR}}
    if conflict:
        op["responses"]["409"] = _ERROR
    if body is not None:
        op["requestBody"] = {"required": True,
                             "content": {"application/json": {"schema": body}}}
    return op


def _q(name: str, kind: str = "integer", **limits: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": kind, **limits}}


LISTING = [_q("filter", "string"),
           _q("sort", "string", enum=[*SORTABLE, *(f"-{f}" for f in SORTABLE)]),
           _q("page", minimum=1), _q("size", minimum=1, maximum=1000)]


def openapi_document(queue_types: list[str] | None = None) -> dict[str, Any]:
    """The document; `queue_types` (the broker's installed queue types) become the enum of
    a new queue's `queue_type`."""
    queue_type: dict[str, Any] = {"type": "string", "nullable": True}
    if queue_types:
        queue_type["enum"] = [*sorted(queue_types), None]
    paths: dict[str, Any] = {
        "/api/v1/broker": {"get": _op("Broker summary: version, uptime, usage, rates")},
        "/api/v1/queues": {
            "get": _op("Queues with statistics (filter, sort by a field, '-field' descending, "
                       "paged)", params=LISTING),
            "post": _op("Create a queue (409 when it exists as a queue of another type)",
                        conflict=True, body={
                            "type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string", "pattern": _VISIBLE,
                                         "not": {"pattern": _NOT_ONE_QUEUE}},
                                "queue_type": queue_type}}),
        },
        "/api/v1/topics": {"get": _op("Topics with statistics", params=LISTING)},
        "/api/v1/topics/{name}": {"delete": _op("Delete a topic; its consumers are closed",
                                                params=[_NAME])},
        "/api/v1/queues/{name}": {
            "get": _op("A queue's statistics, consumers and partitions", params=[_NAME]),
            "delete": _op("Delete a queue and its messages", params=[_NAME]),
        },
        "/api/v1/queues/{name}/messages": {
            "get": _op("Browse from the store, paged by sequence number",
                       params=[_NAME, _q("after", minimum=0), _q("limit", minimum=1, maximum=1000),
                               {**_q("selector", "string"), "schema": _SELECTOR}]),
            "post": _op("Send a test message", params=[_SEND_TO], body={
                "type": "object", "properties": {
                    "body": {"type": "string"},
                    "properties": {"type": "object", "additionalProperties": _SCALAR},
                    "persistent": {"type": "boolean"}}}),
        },
        "/api/v1/queues/{name}/purge": {"post": _op("Remove every waiting message",
                                                    params=[_NAME])},
        "/api/v1/queues/{name}/pause": {"post": _op("Stop dispatching", params=[_NAME])},
        "/api/v1/queues/{name}/resume": {"post": _op("Dispatch again", params=[_NAME])},
        "/api/v1/queues/{name}/move": {"post": _op(
            "Move messages by id or selector to another queue (`to` naming this queue is 400)",
            params=[_NAME], body=_MOVE)},
        "/api/v1/queues/{name}/copy": {"post": _op("Copy messages by id or selector",
                                                   params=[_NAME], body=_MOVE)},
        "/api/v1/queues/{name}/remove": {"post": _op("Delete messages by id or selector",
                                                     params=[_NAME], body=_SELECT)},
        "/api/v1/queues/{name}/retry": {"post": _op(
            "Send dead-lettered messages back to their original destination",
            params=[_NAME], body=_SELECT)},
        "/api/v1/connections": {"get": _op("Client connections")},
        "/api/v1/connections/{cid}": {"delete": _op("Close a connection", params=[
            {"name": "cid", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/api/v1/subscriptions": {"get": _op("Durable subscriptions")},
        "/api/v1/subscriptions/{client_id}/{name}": {"delete": _op(
            "Delete a durable subscription and its messages (409 while a consumer is attached)",
            params=[{"name": "client_id", "in": "path", "required": True,
                     "schema": {"type": "string", "pattern": _VISIBLE}}, _NAME],
            conflict=True)},
        "/api/v1/broker-connections": {"get": _op("Broker connections and their state")},
        "/api/v1/incoming-broker-connections": {"get": _op(
            "Broker connections other brokers opened to this one (mirror sources) and their "
            "counts")},
        "/api/v1/broker-connections/{name}/{action}": {"post": _op(
            "Start or stop a broker connection, or sync its mirror", params=[
                _NAME, {"name": "action", "in": "path", "required": True,
                        "schema": {"type": "string", "enum": ["start", "stop", "sync"]}}])},
        "/api/v1/bridges": {"get": _op("Bridges (relaymq-bridge) with state and counts")},
        "/api/v1/bridges/{name}": {"get": _op("A bridge's state, counts and last error",
                                              params=[_BRIDGE])},
        "/api/v1/bridges/{name}/{action}": {"post": _op(
            "Start, stop, pause or resume a bridge; answers its state", params=[
                _BRIDGE, {"name": "action", "in": "path", "required": True,
                          "schema": {"type": "string",
                                     "enum": ["start", "stop", "pause", "resume"]}}])},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "RelayMQ console API", "version": "1"},
        "components": {"securitySchemes": {"basic": {"type": "http", "scheme": "basic"}}},
        "security": [{"basic": []}],
        "paths": paths,
    }
