"""Real ActiveMQ 5.17 and RabbitMQ 3.10 peers: the session fixtures of
`relaymq.testing.peers` (shared with other plugins' tests)."""

from relaymq.testing.peers import Peer, activemq, rabbitmq

__all__ = ["Peer", "activemq", "rabbitmq"]
