"""Every `<kahaDB>` attribute is documented, in the guide and in the README."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.config.typed import attribute_names
from relaymq_kahadb.config import NOT_APPLICABLE, KahaDBConfig

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "docs" / "kahadb.md", ROOT / "plugins" / "kahadb" / "README.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_attribute_is_documented(doc: Path) -> None:
    text = doc.read_text()
    missing = [a for a in attribute_names(KahaDBConfig) if f"`{a}`" not in text]
    assert not missing, f"{doc.name} does not document {missing}"


def test_attributes_without_effect_are_fields() -> None:
    names = {f for f in KahaDBConfig.__dataclass_fields__}
    assert set(NOT_APPLICABLE) <= names
