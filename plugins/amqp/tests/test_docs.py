"""Documentation that cannot drift: every URI option is in docs/amqp.md and the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from relaymq_amqp.server import OPTIONS, TLS_OPTIONS

PLUGIN = Path(__file__).resolve().parents[1]
DOCS = PLUGIN.parents[1] / "docs" / "amqp.md"


def rows(path: Path) -> set[str]:
    return set(re.findall(r"^\| `([\w.+-]+)`", path.read_text(encoding="utf-8"), flags=re.M))


@pytest.mark.parametrize("option", sorted(OPTIONS) + list(TLS_OPTIONS))
def test_every_option_has_a_table_row(option: str) -> None:
    assert option in rows(DOCS), f"docs/amqp.md needs a table row '| `{option}` |'"
    assert f"`{option}`" in (PLUGIN / "README.md").read_text(encoding="utf-8"), (
        f"plugins/amqp/README.md does not mention `{option}`")


def test_entry_points_match_the_documented_schemes() -> None:
    pyproject = (PLUGIN / "pyproject.toml").read_text(encoding="utf-8")
    schemes = re.findall(r'^"?([\w+]+)"? = "relaymq_amqp.server:AmqpTransportFactory"', pyproject, re.M)
    text = DOCS.read_text(encoding="utf-8")
    assert set(schemes) == {"amqp", "amqps", "amqp+ssl", "amqp+nio", "amqp+nio+ssl"}
    for scheme in schemes:
        assert f"`{scheme}`" in text
