"""Documentation that cannot drift: every hook, hook argument, config element and
attribute the kernel defines must be documented in docs/ (datasette's test_docs idea)."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from relaymq import hookspecs
from relaymq.config import model
from relaymq.config.schema import ELEMENT_ATTRIBUTES, ELEMENTS

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROOT = DOCS.parent


def read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def hook_specs() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in vars(hookspecs).items()
        if name.startswith("relaymq_") and hasattr(fn, "relaymq_spec")
    }


def sections(text: str) -> dict[str, str]:
    """Heading text -> the body up to the next heading of any level."""
    parts = re.split(r"^(#{1,6} .*)$", text, flags=re.M)
    return {parts[i].lstrip("#").strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


# ---------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------


def test_there_are_hook_specs() -> None:
    assert len(hook_specs()) >= 15


@pytest.mark.parametrize("hook", sorted(hook_specs()))
def test_every_hook_has_a_section_with_its_signature_as_heading(hook: str) -> None:
    params = list(hook_specs()[hook].parameters)
    heading = f"`{hook}({', '.join(params)})`"
    assert heading in sections(read("hooks.md")), (
        f"docs/hooks.md needs a heading '### {heading}' for the hook spec {hook}")


@pytest.mark.parametrize("hook", sorted(hook_specs()))
def test_every_hook_argument_is_explained_and_there_is_an_example(hook: str) -> None:
    params = list(hook_specs()[hook].parameters)
    body = sections(read("hooks.md"))[f"`{hook}({', '.join(params)})`"]
    for param in params:
        assert re.search(rf"^\* `{param}` — \S", body, flags=re.M), (
            f"docs/hooks.md: the section of {hook} must explain its argument '{param}' "
            f"in a line '* `{param}` — ...'")
    assert "```python" in body and "@hookimpl" in body, f"{hook} needs an example"


def test_no_documented_hook_that_does_not_exist() -> None:
    documented = set(re.findall(r"^#+ `(relaymq_\w+)\(", read("hooks.md"), flags=re.M))
    assert documented == set(hook_specs())


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("element", ELEMENTS)
def test_every_element_the_loader_understands_is_documented(element: str) -> None:
    assert f"<{element}>" in read("configuration.md"), (
        f"docs/configuration.md does not document the element <{element}>")


@pytest.mark.parametrize(("element", "attribute"), [
    (element, attribute) for element, attributes in ELEMENT_ATTRIBUTES.items()
    for attribute in attributes
])
def test_every_attribute_is_documented_in_a_table(element: str, attribute: str) -> None:
    rows = re.findall(r"^\| `(\w[\w-]*)` \|", read("configuration.md"), flags=re.M)
    assert attribute in rows, (
        f"docs/configuration.md has no table row '| `{attribute}` |' for <{element} {attribute}>")


MODEL_CLASSES = [
    cls for cls in vars(model).values()
    if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == model.__name__
]


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_every_field_of_the_config_model_is_documented(cls: type) -> None:
    text = read("configuration.md")
    model_part = text[text.index("## The typed model"):]
    assert f"`{cls.__name__}`" in model_part, f"docs/configuration.md: document {cls.__name__}"
    for f in dataclasses.fields(cls):
        assert f"`{f.name}`" in model_part, (
            f"docs/configuration.md: the typed model section does not mention "
            f"{cls.__name__}.{f.name}")


# ---------------------------------------------------------------------------
# The rest of docs/: links resolve, the README quick start runs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["README.md", *sorted(p.name for p in DOCS.glob("*.md"))])
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page if page == "README.md" else DOCS / page
    for target in re.findall(r"\]\((?!https?://|#)([^)#]+)", path.read_text(encoding="utf-8")):
        assert (path.parent / target).exists(), f"{page} links to missing {target}"


def test_readme_quick_start_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"## Quick start.*?```python\n(.*?)```", readme, flags=re.S).group(1)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello, RelayMQ {'region': 'eu'}"


def test_readme_names_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in readme and "make test" in readme


# ---------------------------------------------------------------------------
# The management API
# ---------------------------------------------------------------------------


def management_members() -> list[str]:
    from relaymq.management import Management

    return sorted(name for name in vars(Management) if not name.startswith("_"))


def test_the_management_api_has_members() -> None:
    assert len(management_members()) >= 25


@pytest.mark.parametrize("member", management_members())
def test_every_management_method_is_documented(member: str) -> None:
    headings = re.findall(r"^### `(\w+)[(`]", read("management.md"), flags=re.M)
    assert member in headings, (
        f"docs/management.md needs a heading '### `{member}(...)`' for Management.{member}")


def test_no_documented_management_method_that_does_not_exist() -> None:
    headings = set(re.findall(r"^### `(\w+)[(`]", read("management.md"), flags=re.M))
    assert headings == set(management_members())


# ---------------------------------------------------------------------------
# Change feed
# ---------------------------------------------------------------------------


def _event_types() -> list[type]:
    from relaymq.feed import EVENT_TYPES

    return list(EVENT_TYPES)


@pytest.mark.parametrize("event", _event_types(), ids=lambda t: t.__name__)
def test_every_change_feed_event_type_is_documented_with_its_fields(event: type) -> None:
    body = sections(read("change-feed.md")).get(f"`{event.__name__}`")
    assert body is not None, (
        f"docs/change-feed.md needs a heading '### `{event.__name__}`' for the event type")
    assert f'`kind = "{event.kind}"`' in body  # type: ignore[attr-defined]
    for f in dataclasses.fields(event):
        assert f"`{f.name}`" in body, (
            f"docs/change-feed.md, section {event.__name__}: field `{f.name}` is not explained")


def test_every_removal_reason_is_documented() -> None:
    from relaymq.feed import RemovalReason

    text = read("change-feed.md")
    for reason in RemovalReason.ALL:
        assert f"| `{reason}` |" in text, f"docs/change-feed.md: removal reason {reason!r}"
