import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from peers import activemq, rabbitmq  # noqa: E402,F401 - session fixtures
