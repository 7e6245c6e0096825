"""Real ActiveMQ 5.17 and RabbitMQ 3.10 peers: the session fixtures `activemq` and
`rabbitmq` come from relaymq's pytest plugin (`relaymq.testing.peers`), one of each
per run, shared with other plugins' tests."""

from relaymq.testing.peers import Peer

__all__ = ["Peer"]
