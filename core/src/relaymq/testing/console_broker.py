"""A broker process with relaymq-auth users and the web console, for tests that
drive the console's REST API or the remote CLI (`relaymq queue|bridge ... --url`).

    broker = ConsoleBrokerProcess(tmp, "console-test", body=connectors_xml).start()
    broker.url        # http://127.0.0.1:PORT of the console
    broker.stop()     # SIGTERM; AssertionError (with the log) unless it exits 0

The users are `ADMIN` (group admins, the console's adminGroup), `VIEWER` (users,
the viewerGroup) and `APP` (apps, neither). Needs relaymq-auth and
relaymq-console installed; this module imports neither.
"""

from __future__ import annotations

import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from relaymq.testing.net import free_port
from relaymq.testing.processes import RelaymqProcess
from relaymq.testing.waits import wait_until

ADMIN = ("ops", "ops-secret")
VIEWER = ("watcher", "watch-secret")
APP = ("app", "app-secret")


def users_and_console(http_port: int, console_attributes: str = "", plugins: str = "") -> str:
    """The `<plugins>` element: the three users and the console on `http_port`, with
    `console_attributes` (more `<console>` attributes, verbatim) and `plugins` (more
    plugin elements, such as an `<authorizationPlugin>`, verbatim)."""
    return f"""<plugins>
    <simpleAuthenticationPlugin>
      <users>
        <authenticationUser username="{ADMIN[0]}" password="{ADMIN[1]}" groups="admins"/>
        <authenticationUser username="{VIEWER[0]}" password="{VIEWER[1]}" groups="users"/>
        <authenticationUser username="{APP[0]}" password="{APP[1]}" groups="apps"/>
      </users>
    </simpleAuthenticationPlugin>
    {plugins}
    <console host="127.0.0.1" port="{http_port}" adminGroup="admins" viewerGroup="users" {console_attributes}/>
  </plugins>"""


class ConsoleBrokerProcess(RelaymqProcess):
    """`relaymq run` of a broker named `name` with the users, the console on a free
    port, `attributes` on `<broker>`, `console_attributes` on `<console>` and `body` (its
    other children) verbatim; `plugins`: more elements of `<plugins>`."""

    def __init__(self, tmp: Path, name: str, body: str, attributes: str = "",
                 console_attributes: str = "", plugins: str = "") -> None:
        self.tmp = tmp
        self.http_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        config = tmp / "activemq.xml"
        config.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="{name}" {attributes}>
  {users_and_console(self.http_port, console_attributes, plugins)}
  {body}
</broker>""")
        super().__init__(config, tmp / "broker.log")

    def console_up(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"the broker exited with {self.proc.returncode}:\n"
                                 f"{self.output()[-5000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/login", timeout=1) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def start(self, *, wait: bool = True, timeout: float = 40.0) -> ConsoleBrokerProcess:
        """Start it; with `wait`, return once the console serves its login page."""
        super().start(wait=False)
        if wait:
            try:
                wait_until(self.console_up, "the console", timeout)
            except AssertionError:
                self.kill()
                raise
        return self

    def stop(self, timeout: float = 30.0, must_stop: bool = True) -> None:
        """SIGTERM; AssertionError unless it exits 0 within `timeout` (a clean stop)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            if must_stop:
                raise AssertionError(f"the broker did not stop within {timeout:g} s:\n"
                                     f"{self.output()[-5000:]}") from None
            return
        if must_stop:
            assert code == 0, f"the broker exited with {code}:\n{self.output()[-5000:]}"
