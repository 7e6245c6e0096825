import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from relaymq.testing.peers import rabbitmq  # noqa: E402,F401 - session fixture
