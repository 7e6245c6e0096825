"""Artemis-compatible mirroring (see docs/mirror.md)."""

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])
