import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402
from fedtools import Brokers  # noqa: E402


@pytest.fixture
def brokers(tmp_path: Path):  # type: ignore[no-untyped-def]
    """`relaymq run` brokers for one test, every one stopped at its end."""
    b = Brokers(tmp_path)
    yield b
    b.close()
