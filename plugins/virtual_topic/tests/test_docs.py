"""docs/virtual-destinations.md documents every element and attribute this plugin reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from relaymq.config.typed import attribute_names
from relaymq_virtual_topic import CompositeDestination, MirroredQueue, VirtualTopic

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "virtual-destinations.md"
README = Path(__file__).resolve().parents[1] / "README.md"

ATTRIBUTES = sorted({
    *attribute_names(VirtualTopic), *attribute_names(CompositeDestination),
    *attribute_names(MirroredQueue.Config),
    "physicalName", "selector", "queue", "topic",  # <forwardTo> children
})


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_every_attribute_has_a_table_row(attribute: str) -> None:
    rows = re.findall(r"^\| `(\w+)` \|", DOC.read_text(encoding="utf-8"), flags=re.M)
    assert attribute in rows, f"docs/virtual-destinations.md needs a row '| `{attribute}` |'"
    assert attribute in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("element", ["virtualDestinationInterceptor", "virtualDestinations",
                                     "virtualTopic", "compositeQueue", "compositeTopic",
                                     "forwardTo", "queue", "topic", "filteredDestination",
                                     "mirroredQueue"])
def test_every_element_is_documented(element: str) -> None:
    assert f"<{element}" in DOC.read_text(encoding="utf-8")


def test_the_documented_xml_examples_build(tmp_path: Path) -> None:
    from relaymq.config.loader import load_config_text
    from relaymq_virtual_topic import parse_interceptor

    blocks = re.findall(r"```xml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    built = 0
    for block in blocks:
        if "<virtualDestinationInterceptor>" not in block or "..." in block:
            continue
        xml = f'<broker xmlns="http://activemq.apache.org/schema/core">{block}</broker>'
        config = load_config_text(xml, strict=True)
        for element in config.destination_interceptors:
            parse_interceptor(element, strict=True)
            built += 1
    assert built >= 2
