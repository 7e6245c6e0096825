"""docs/selector-cache.md documents every attribute of <virtualSelectorCacheBrokerPlugin>."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from relaymq.config.typed import attribute_names
from relaymq_selector_cache import VirtualSelectorCacheBrokerPlugin

DOC = Path(__file__).resolve().parents[3] / "docs" / "selector-cache.md"
README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("attribute", attribute_names(VirtualSelectorCacheBrokerPlugin.Config))
def test_every_attribute_has_a_table_row(attribute: str) -> None:
    for path in (DOC, README):
        rows = re.findall(r"^\| `(\w+)` \|", path.read_text(encoding="utf-8"), flags=re.M)
        assert attribute in rows, f"{path.name} needs a row '| `{attribute}` |'"
