import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
# the peers' session fixtures (activemq, rabbitmq) come from relaymq's pytest plugin
