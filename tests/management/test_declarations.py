"""Queue declarations made through management (a type, settings) are kept in the
store: a broker started again on the same kahaDB store has them back."""

from __future__ import annotations

import pytest
from relaymq.errors import DestinationError


def test_a_declared_type_and_settings_survive_a_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    assert broker.run(m.create_queue("TYPED", queue_type="standard")).queue_type == "standard"
    broker.run(m.create_queue("PLAIN"))
    assert broker.run(m.set_queue_settings("PLAIN", {"a": 1, "b": ["x", "y"]})) == {
        "a": 1, "b": ["x", "y"]}
    assert broker.run(m.set_queue_settings("PLAIN", {"a": None, "c": True})) == {
        "b": ["x", "y"], "c": True}
    with pytest.raises(DestinationError, match="must be JSON values"):
        broker.run(m.set_queue_settings("PLAIN", {"bad": object()}))
    with pytest.raises(DestinationError, match="is not an existing queue"):
        broker.run(m.set_queue_settings("NOSUCH", {"a": 1}))
    broker.run(m.create_queue("DOOMED"))
    broker.run(m.set_queue_settings("DOOMED", {"a": 1}))
    assert broker.run(m.delete_destination("DOOMED")) is True
    broker.stop()

    again = start_broker()
    m = again.management
    assert again.call(lambda: m.queue("TYPED").queue_type) == "standard"
    assert again.call(lambda: m.queue_settings("PLAIN")) == {"b": ["x", "y"], "c": True}
    assert again.call(lambda: m.queue_settings("DOOMED")) == {}
    assert {d.name for d in again.call(m.declared_queues)} == {"TYPED", "PLAIN"}
    # the declarations are not a destination of their own
    assert not any(d.key.startswith("declared://") for d in again.run(m.destinations()))
    assert again.run(m.set_queue_settings("PLAIN", {"z": 0}, replace=True)) == {"z": 0}
    again.stop()
    third = start_broker()
    assert third.call(lambda: third.management.queue_settings("PLAIN")) == {"z": 0}
