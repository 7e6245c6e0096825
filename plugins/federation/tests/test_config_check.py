"""`relaymq config check` checks `<federation>` and the `<sender>`, `<receiver>`
and `<peer>` elements as `relaymq run` does, before anything starts: a wrong
value is an error with the file and line, an attribute not understood a
warning (an error under --strict)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from relaymq.cli import main


def xml(tmp_path: Path, inside: str) -> Path:
    path = tmp_path / "activemq.xml"
    path.write_text(f"""<broker brokerName="b1" persistent="false">
  <broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:1" name="HUB">
      {inside}
    </amqp-connection>
  </broker-connections>
</broker>""")
    return path


def check(path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["config", "check", "--allow-vm-only", *args, str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize(("inside", "needle"), [
    ('<federation><local-address-policy name="p" max-hops="many"><include address-match="a.#"/>'
     '</local-address-policy></federation>', "<local-address-policy> ({path}:4) max-hops: 'many' "
     "is not a whole number"),
    ('<federation><local-queue-policy name="q" include-federated="maybe"/></federation>',
     "'maybe' is not a boolean"),
    ('<federation><local-address-policy max-hops="1"/></federation>', "a policy needs a name"),
    ('<federation><property key="amqpCredits" value="lots"/></federation>',
     "property amqpCredits: 'lots' is not a whole number"),
    ('<federation><remote-thing name="z"/></federation>', "not a federation element"),
    ("<sender/>", "<sender> ({path}:4): needs address-match or queue-name"),
])
def test_a_wrong_value_fails_the_check_with_the_line(tmp_path: Path, inside: str,
                                                    needle: str) -> None:
    path = xml(tmp_path, inside)
    code, out = check(path)
    assert code != 0, out
    assert needle.format(path=path) in out, out


def test_attributes_not_understood_are_warnings_and_errors_under_strict(tmp_path: Path) -> None:
    path = xml(tmp_path, '<federation><local-address-policy name="p" max-hop="2">'
                         '<include address-match="a.#"/></local-address-policy></federation>'
                         '<receiver queue-name="in" adress-match="x"/>')
    code, out = check(path)
    assert code == 0, out
    assert "attribute(s) max-hop not understood" in out, out
    assert "attribute(s) adress-match not understood" in out, out
    code, out = check(path, "--strict")
    assert code != 0, out
    assert "max-hop not understood; ignored (an error because of --strict)" in out, out


def test_a_good_federation_passes(tmp_path: Path) -> None:
    path = xml(tmp_path, '<federation><local-address-policy name="p" max-hops="2">'
                         '<include address-match="a.#"/></local-address-policy>'
                         '<property key="amqpCredits" value="100"/></federation>'
                         '<sender address-match="out.#"/><peer queue-name="shared"/>')
    code, out = check(path, "--strict")
    assert code == 0, out
    assert "not understood" not in out and "error" not in out.lower(), out
