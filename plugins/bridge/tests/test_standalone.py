"""`relaymq bridge run CONFIG`: what it refuses (the kill -9 tests of a bridge
process are in test_standalone_kill.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from bridge_helpers import RELAYMQ


def test_standalone_refuses_vm_and_bad_files(tmp_path: Path) -> None:
    import subprocess

    cfg = tmp_path / "b.xml"
    cfg.write_text("""<bridges><bridge name="x" source-uri="vm://localhost" source-destination="queue://a"
      target-uri="amqp://127.0.0.1:1" target-destination="queue://b"/></bridges>""")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "vm://localhost means the local broker" in r.stderr
    cfg.write_text("<bridges/>")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "no <bridge> found" in r.stderr
    yml = tmp_path / "b.yaml"
    yml.write_text("""bridges:
  - bridge: {name: y, source-uri: "vm://localhost", source-destination: "queue://a",
             target-uri: "amqp://127.0.0.1:1", target-destination: "queue://b"}
""")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(yml)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "bridge y: vm://localhost means the local broker" in r.stderr
    assert sys.executable  # the relaymq script lives next to this interpreter


def test_standalone_refuses_a_bad_bridge(tmp_path: Path) -> None:
    """Standalone, a bad bridge is a configuration error (exit 2), not a failed bridge."""
    import subprocess

    cfg = tmp_path / "b.xml"
    cfg.write_text("""<bridges><bridge name="sel" source-uri="amqp://127.0.0.1:1"
      source-destination="queue://a" target-uri="amqp://127.0.0.1:1" target-destination="queue://b"
      selector="a = = 1"/></bridges>""")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "bridge sel" in r.stderr and "invalid selector" in r.stderr
