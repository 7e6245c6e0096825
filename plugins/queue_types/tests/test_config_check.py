"""`relaymq config check` (and `run`, before anything starts) checks the Solace
queue attributes: a misspelt `accessType`, negative counts and times, and a
dead message queue beside a deadLetterStrategy are errors with file and line,
not a round-robin queue or an ERROR to the first client."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from relaymq.cli import main


def check(tmp_path: Path, entries: str) -> tuple[int, str, Path]:
    path = tmp_path / "activemq.xml"
    path.write_text(f"""<broker brokerName="qt" persistent="false">
  <destinationPolicy><policyMap><policyEntries>
    {entries}
  </policyEntries></policyMap></destinationPolicy>
</broker>""")
    result = CliRunner().invoke(main, ["config", "check", "--allow-vm-only", str(path)])
    return result.exit_code, result.output, path


@pytest.mark.parametrize(("entry", "needle"), [
    ('<policyEntry queue="c.>" accessType="exclusiv"/>',
     'accessType="exclusiv": use exclusive or non-exclusive'),
    ('<policyEntry queue="p.>" partitionCount="-2"/>', 'partitionCount="-2" must be 0 or more'),
    ('<policyEntry queue="h.>" partitionRebalanceDelay="-1"/>',
     'partitionRebalanceDelay="-1" must be 0 or more'),
    ('<policyEntry queue="g.>" deadMessageQueue="G.DMQ"><deadLetterStrategy>'
     '<individualDeadLetterStrategy queuePrefix="DLQ."/></deadLetterStrategy></policyEntry>',
     "sets both deadMessageQueue and a deadLetterStrategy"),
])
def test_a_bad_queue_type_attribute_fails_the_check(tmp_path: Path, entry: str, needle: str) -> None:
    code, out, path = check(tmp_path, entry)
    assert code != 0, out
    assert needle in out and f"{path}:3" in out, out


def test_access_type_in_any_case_is_read(tmp_path: Path) -> None:
    from relaymq.config import load_config

    code, out, path = check(tmp_path, '<policyEntry queue="a.>" accessType="Exclusive"/>'
                                      '<policyEntry queue="b.>" accessType="NON-EXCLUSIVE"/>')
    assert code == 0, out
    kinds = [e.access_type for e in load_config(path).policy_entries]
    assert kinds == ["exclusive", "non-exclusive"]
