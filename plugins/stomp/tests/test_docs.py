"""Documentation that cannot drift: every URI option and scheme is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from relaymq_stomp.config import OPTIONS, TLS_OPTIONS

PLUGIN = Path(__file__).resolve().parents[1]
DOCS = PLUGIN.parents[1] / "docs" / "stomp.md"
README = PLUGIN / "README.md"


def rows(path: Path) -> set[str]:
    return set(re.findall(r"^\| `([\w.+-]+)`", path.read_text(encoding="utf-8"), flags=re.M))


@pytest.mark.parametrize("option", sorted(OPTIONS) + sorted(TLS_OPTIONS))
def test_every_option_is_documented(option: str) -> None:
    assert option in rows(DOCS), f"docs/stomp.md needs a table row '| `{option}` |'"
    assert f"`{option}`" in README.read_text(encoding="utf-8"), (
        f"plugins/stomp/README.md does not mention `{option}`")


def test_documented_defaults_match_the_code() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for option, (default, _what) in OPTIONS.items():
        assert f"| `{option}` | {default} |" in text, f"docs/stomp.md: default of {option}"


def test_entry_points_match_the_documented_schemes() -> None:
    pyproject = (PLUGIN / "pyproject.toml").read_text(encoding="utf-8")
    schemes = set(re.findall(r'^"?([\w+]+)"? = "relaymq_stomp.server:StompTransportFactory"',
                             pyproject, re.M))
    assert schemes == {"stomp", "stomp+nio", "stomp+ssl", "stomp+nio+ssl"}
    text = DOCS.read_text(encoding="utf-8")
    for scheme in schemes:
        assert f"`{scheme}`" in text


def test_options_are_consumed(start_broker) -> None:
    """Every documented option is read (none is reported as having no effect)."""
    query = "&".join(f"{name}={'1,1' if name == 'defaultHeartBeat' else '2'}" for name in OPTIONS)
    bt = start_broker(f"stomp://127.0.0.1:0?{query}")
    ctx = bt.broker.connectors[0].context
    assert set(OPTIONS) <= ctx.used_options


@pytest.mark.parametrize("query", ["maxHeaders=many", "defaultHeartBeat=5000",
                                   "hbGracePeriodMultiplier=0.5", "maxDataLength=-1"])
def test_bad_option_values_stop_the_start(start_broker, query: str) -> None:
    with pytest.raises(Exception, match="connector"):
        start_broker(f"stomp://127.0.0.1:0?{query}")
