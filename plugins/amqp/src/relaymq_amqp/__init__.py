"""RelayMQ AMQP 1.0 transport (amqp://, amqps://)"""

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])
