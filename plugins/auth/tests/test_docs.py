"""docs/auth.md and the README document every element and attribute this plugin reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from relaymq.config.typed import attribute_names
from relaymq_auth.authorization import AuthorizationEntry
from relaymq_auth.jaas import JaasDualConfig
from relaymq_auth.simple import AuthenticationUser, SimpleConfig

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "auth.md"
README = Path(__file__).resolve().parents[1] / "README.md"

ATTRIBUTES = sorted({*attribute_names(SimpleConfig), *attribute_names(AuthenticationUser),
                     *attribute_names(JaasDualConfig), *attribute_names(AuthorizationEntry)})
ELEMENTS = ["simpleAuthenticationPlugin", "users", "authenticationUser",
            "jaasAuthenticationPlugin", "jaasCertificateAuthenticationPlugin",
            "jaasDualAuthenticationPlugin", "authorizationPlugin", "map", "authorizationMap",
            "authorizationEntries", "authorizationEntry", "tempDestinationAuthorizationEntry",
            "defaultEntry"]
MODULE_OPTIONS = ["org.apache.activemq.jaas.properties.user",
                  "org.apache.activemq.jaas.properties.group",
                  "org.apache.activemq.jaas.textfiledn.user",
                  "org.apache.activemq.jaas.textfiledn.group",
                  "org.apache.activemq.jaas.guest.user", "org.apache.activemq.jaas.guest.group",
                  "credentialsInvalidate", "reload"]


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_every_attribute_has_a_table_row(attribute: str) -> None:
    rows = re.findall(r"^\| `(\w+)` \|", DOC.read_text(encoding="utf-8"), flags=re.M)
    assert attribute in rows, f"docs/auth.md needs a row '| `{attribute}` |'"
    assert attribute in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("element", ELEMENTS)
def test_every_element_is_documented(element: str) -> None:
    assert f"<{element}>" in DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("option", MODULE_OPTIONS)
def test_every_login_module_option_is_documented(option: str) -> None:
    assert option in DOC.read_text(encoding="utf-8")


def test_the_documented_xml_examples_build() -> None:
    from relaymq.config.loader import load_config_text
    from relaymq_auth.authorization import parse_authorization
    from relaymq_auth.simple import parse_simple

    built = 0
    for block in re.findall(r"```xml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        if "<authorizationPlugin>" not in block and "<simpleAuthenticationPlugin" not in block:
            continue
        if "..." in block and "<authorizationPlugin>" not in block:
            continue
        body = re.sub(r"<simpleAuthenticationPlugin>\.\.\.</simpleAuthenticationPlugin>", "", block)
        config = load_config_text(
            f'<broker xmlns="http://activemq.apache.org/schema/core">{body}</broker>')
        for element in config.plugins:
            if element.tag == "authorizationPlugin":
                parse_authorization(element, strict=True)
                built += 1
            elif element.tag == "simpleAuthenticationPlugin" and "$scrypt$ln=14,r=8,p=1$..." \
                    not in body:
                parse_simple(element, strict=True)
                built += 1
    assert built >= 1
