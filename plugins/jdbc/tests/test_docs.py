"""Every `<jdbcPersistenceAdapter>` and locker attribute is documented, in the guide and the README."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.config.typed import attribute_names
from relaymq_jdbc.config import LOCKERS, NOT_APPLICABLE, JDBCConfig, LockerConfig

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "docs" / "jdbc.md", ROOT / "plugins" / "jdbc" / "README.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_attribute_is_documented(doc: Path) -> None:
    text = doc.read_text()
    names = attribute_names(JDBCConfig) + attribute_names(LockerConfig)
    missing = [a for a in names if f"`{a}`" not in text]
    missing += [f"<{k}>" for k in LOCKERS if f"`<{k}>`" not in text]
    assert not missing, f"{doc.name} does not document {missing}"


def test_attributes_without_effect_are_fields() -> None:
    assert set(NOT_APPLICABLE) <= set(JDBCConfig.__dataclass_fields__)


def test_the_guide_names_every_table() -> None:
    from relaymq_jdbc.schema import make_schema

    text = (ROOT / "docs" / "jdbc.md").read_text()
    for table in make_schema().tables:
        assert f"`{table.name}`" in text
        for column in table.columns:
            assert f"`{column.name}`" in text, f"{table.name}.{column.name} is not documented"
