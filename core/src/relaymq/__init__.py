"""RelayMQ: a message broker with a small kernel and pluggable features."""

from relaymq import compiled as _compiled

__version__ = "0.1.0"

_compiled.select(__name__, __path__[0])
