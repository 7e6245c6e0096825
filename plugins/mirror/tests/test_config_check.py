"""`relaymq config check` checks `<amqp-connection>` and `<mirror>` as `relaymq
run` does, before anything starts: the same errors and warnings, in XML and
YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from relaymq.cli import main


def xml(tmp_path: Path, connection: str, mirror: str) -> Path:
    path = tmp_path / "activemq.xml"
    path.write_text(f"""<broker brokerName="b1" persistent="false">
  <broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:1" name="DR" {connection}>
      <mirror {mirror}/>
    </amqp-connection>
  </broker-connections>
</broker>""")
    return path


def check(path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["config", "check", "--allow-vm-only", *args, str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize(("connection", "mirror", "needle"), [
    ('retry-interval="abc"', "", '<amqp-connection retry-interval="abc"> at {path}:3: expected an integer'),
    ('reconnect-attempts="many"', "", "expected an integer"),
    ('retry-interval="-1"', "", "the interval must be 0 ms or more"),
    ("", 'sync="maybe"', '<mirror sync="maybe"> at {path}:4: expected true or false'),
    ("", 'window="0"', '<mirror window="0"> at {path}:4: the window is the number of events'),
])
def test_bad_attributes_fail_the_check_with_the_line(tmp_path: Path, connection: str, mirror: str,
                                                     needle: str) -> None:
    path = xml(tmp_path, connection, mirror)
    code, output = check(path)
    assert code == 1, output
    assert needle.format(path=path) in output


def test_unknown_attributes_and_wildcard_filters_are_warnings_errors_under_strict(
        tmp_path: Path) -> None:
    path = xml(tmp_path, "", 'foo="bar" address-filter="orders.>,!orders.internal"')
    code, output = check(path)
    assert code == 0, output
    assert "attribute 'foo' is ignored" in output
    assert "'orders.>' is matched as a literal prefix" in output
    code, output = check(path, "--strict")
    assert code == 1, output
    assert "(an error because of --strict)" in output


def test_a_good_connection_passes_in_yaml_too(tmp_path: Path) -> None:
    path = tmp_path / "broker.yaml"
    path.write_text("""broker:
  brokerName: b1
  persistent: false
  broker-connections:
    - amqp-connection:
        uri: tcp://127.0.0.1:1
        name: DR
        retry-interval: 1000
        mirror:
          sync: true
          address-filter: "orders.,!orders.internal"
""")
    code, output = check(path)
    assert code == 0, output
    path.write_text(path.read_text().replace("retry-interval: 1000", "retry-interval: soon"))
    code, output = check(path)
    assert code == 1, output
    assert "expected an integer" in output
