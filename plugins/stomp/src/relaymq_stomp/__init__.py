"""RelayMQ STOMP 1.0/1.1/1.2 transport (stomp://, stomp+nio://, stomp+ssl://)"""

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])
