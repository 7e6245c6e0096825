"""Artemis-compatible mirroring (see docs/mirror.md)."""
