"""Fixtures: RelayMQ brokers (in this process on their own threads, or
`relaymq run` processes for kill -9) that mirror to each other."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mirrortools import BrokerThread, make_config  # noqa: E402


@pytest.fixture
def brokers() -> Iterator[Callable[..., BrokerThread]]:
    started: list[BrokerThread] = []

    def start(**kwargs: Any) -> BrokerThread:
        bt = BrokerThread(make_config(**kwargs)).start()
        started.append(bt)
        return bt

    yield start
    for bt in reversed(started):
        bt.stop()
