"""A config naming <virtualSelectorCacheBrokerPlugin> without the plugin installed
fails with the install hint (the distribution hidden from a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from relaymq.plugins import BROKER_PLUGINS, PluginRegistry

#: Runs Python with some distributions invisible to importlib.metadata (and so to
#: stevedore and the registry), as if they were not installed.
HIDE = textwrap.dedent("""
    import importlib.machinery, sys
    HIDDEN = set(sys.argv[1].split(","))
    _path_finder = importlib.machinery.PathFinder

    class _Hiding(_path_finder):
        @classmethod
        def find_distributions(cls, *args, **kwargs):
            for dist in _path_finder.find_distributions(*args, **kwargs):
                if (dist.metadata["Name"] or "").lower() not in HIDDEN:
                    yield dist

    sys.meta_path[:] = [_Hiding if f is _path_finder else f for f in sys.meta_path]
    del sys.argv[1]
""")

ACTIVEMQ_XML = """\
<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
    <plugins>
      <virtualSelectorCacheBrokerPlugin persistFile="${activemq.data}/selectorcache.json"/>
    </plugins>
  </broker>
</beans>
"""


def run_without(dists: str, code: str, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / f"cache-{dists}"))
    return subprocess.run([sys.executable, "-c", HIDE + textwrap.dedent(code), dists, *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_the_registry_names_the_distribution_to_install():
    message = PluginRegistry().not_found_message(BROKER_PLUGINS, "virtualSelectorCacheBrokerPlugin")
    assert "pip install relaymq-selector-cache" in message


def test_config_check_without_the_plugin_fails_with_the_install_hint(tmp_path):
    config = tmp_path / "activemq.xml"
    config.write_text(ACTIVEMQ_XML)
    done = run_without("relaymq-selector-cache", """
        import sys
        from relaymq.cli import main
        sys.argv = ["relaymq", "config", "check", sys.argv[1]]
        main()
    """, str(config), tmp=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert f"<virtualSelectorCacheBrokerPlugin> at {config}:4" in out
    assert "pip install relaymq-selector-cache" in out


def test_the_cli_command_goes_away_with_the_plugin(tmp_path):
    done = run_without("relaymq-selector-cache", """
        import sys
        from relaymq.cli import main
        sys.argv = ["relaymq", "selector-cache", "show", "x.json"]
        main()
    """, tmp=tmp_path)
    assert done.returncode == 2
    assert "No such command 'selector-cache'" in done.stderr
