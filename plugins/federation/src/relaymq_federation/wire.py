"""Artemis' AMQP federation wire names (see
shared/reference/artemis-broker-connections-wire.md, section 4)."""

from __future__ import annotations

CONTROL_LINK = "AMQ_FEDERATION_CONTROL_LINK"
EVENT_LINK = "AMQ_FEDERATION_EVENT_LINK"
ADDRESS_RECEIVER = "AMQ_FEDERATION_ADDRESS_RECEIVER"
QUEUE_RECEIVER = "AMQ_FEDERATION_QUEUE_RECEIVER"
WAYPOINT = "qd.waypoint"

FEDERATION_PREFIX = "$ACTIVEMQ_ARTEMIS_FEDERATION"
VERSION = "federation_version"
CONFIGURATION = "federation-configuration"
FEDERATION_NAME = "federationName"
POLICY_NAME = "federationPolicyName"
PRIORITY = "priority"
ADDRESS_SOURCE_PROPERTIES = "federated-address-source-properties"

OP_TYPE = "x-opt-amq-federation-op-type"
ADD_QUEUE_POLICY = "ADD_QUEUE_POLICY"
ADD_ADDRESS_POLICY = "ADD_ADDRESS_POLICY"
EVENT_TYPE = "x-opt-amq-federation-ev-type"

NO_LOCAL_KEY = "apache.org:no-local-filter:list"
NO_LOCAL_CODE = 0x0000468C00000003
SELECTOR_KEY = "jms-selector"
SELECTOR_CODE = 0x0000468C00000004

#: link-name prefixes Artemis uses (RelayMQ also recognises links by them:
#: proton-c 0.40 carries no link-level capabilities)
CONTROL_LINK_PREFIX = "federation-control-link:"
EVENTS_SENDER_PREFIX = "federation-events-sender:"
EVENTS_RECEIVER_PREFIX = "federation-events-receiver:"


def split_fqqn(address: str) -> tuple[str, str | None]:
    """``address::queue`` -> (address, queue); a plain name -> (name, None)."""
    if "::" in address:
        a, q = address.split("::", 1)
        return a, q
    return address, None


def address_queue_name(federation: str, policy: str, address: str, node: str) -> str:
    return f"federation.{federation}.policy.{policy}.address.{address}.node.{node}"
