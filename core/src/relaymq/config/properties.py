"""`${name}` substitution, resolved the way ActiveMQ's launcher would.

An `activemq.xml` written for ActiveMQ says `${activemq.data}/kahadb` and
expects the launcher to have set `activemq.data`. RelayMQ resolves a name from,
in this order (first wins):

1. ``-D name=value`` on the command line (``properties=`` in `load_config`);
2. properties files named by a Spring ``PropertyPlaceholderConfigurer`` bean in the
   same file (``file:${activemq.conf}/credentials.properties``), so migrated
   configs keep their ``${activemq.username}``;
3. the environment as ActiveMQ's ``bin/activemq`` maps it (``ACTIVEMQ_BASE`` ->
   ``activemq.base``, ``ACTIVEMQ_DATA`` -> ``activemq.data``, ...), then any
   environment variable by its own name (``${HOME}``);
4. built-in defaults: ``activemq.base`` is the working directory,
   ``activemq.data`` and ``relaymq.data`` are ``${activemq.base}/data``.

``${name:default}`` (Spring's default separator) uses ``default`` when the name
is nowhere defined. An undefined name without a default is an error naming the
file:line, never an empty string: a store directory of ``/kahadb`` is worse than
a refusal to start.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from relaymq.config.model import Origin
from relaymq.config.report import at
from relaymq.config.typed import suggest
from relaymq.errors import ConfigError

#: Environment variables ActiveMQ's launcher turns into system properties.
ENV_PROPERTIES: Mapping[str, str] = {
    "ACTIVEMQ_HOME": "activemq.home",
    "ACTIVEMQ_BASE": "activemq.base",
    "ACTIVEMQ_CONF": "activemq.conf",
    "ACTIVEMQ_DATA": "activemq.data",
    "ACTIVEMQ_TMP": "java.io.tmpdir",
    "RELAYMQ_BASE": "relaymq.base",
    "RELAYMQ_DATA": "relaymq.data",
}



def builtin_defaults(base_dir: Path | None = None, conf_dir: Path | None = None) -> dict[str, str]:
    """The defaults; values may refer to each other and are expanded on use.

    ``activemq.conf`` defaults to the directory of the config file being loaded
    (ActiveMQ uses ``${activemq.base}/conf``): users run
    ``relaymq run --config /opt/activemq/conf/activemq.xml`` and expect the
    ``credentials.properties`` beside it to be found.
    """
    base = str(base_dir if base_dir is not None else Path.cwd())
    return {
        "activemq.base": base,
        "activemq.home": "${activemq.base}",
        "activemq.conf": str(conf_dir) if conf_dir is not None else "${activemq.base}/conf",
        "activemq.data": "${activemq.base}/data",
        "relaymq.base": "${activemq.base}",
        "relaymq.data": "${activemq.data}",
        "java.io.tmpdir": tempfile.gettempdir(),
        "user.dir": base,
        "user.home": str(Path.home()),
    }


class Properties:
    """Resolves ``${name}`` placeholders from -D, files, the environment and defaults."""

    def __init__(
        self,
        defines: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        base_dir: Path | None = None,
        conf_dir: Path | None = None,
    ) -> None:
        self.defines = dict(defines or {})
        self.env = dict(os.environ if env is None else env)
        self.files: dict[str, str] = {}
        self.defaults = builtin_defaults(base_dir, conf_dir)
        #: every name a substitution used, with its expanded value
        self.used: dict[str, str] = {}

    def _raw(self, name: str) -> str | None:
        if name in self.defines:
            return self.defines[name]
        if name in self.files:
            return self.files[name]
        for var, prop in ENV_PROPERTIES.items():
            if prop == name and var in self.env:
                return self.env[var]
        if name in self.env:
            return self.env[name]
        return self.defaults.get(name)

    def known_names(self) -> list[str]:
        mapped = [p for v, p in ENV_PROPERTIES.items() if v in self.env]
        return sorted({*self.defines, *self.files, *mapped, *self.defaults})

    def get(self, name: str, origin: Origin | None = None) -> str | None:
        """The expanded value of ``name``, or None when it is nowhere defined."""
        return self._expand_name(name, origin, ())

    def _expand_name(self, name: str, origin: Origin | None, stack: tuple[str, ...]) -> str | None:
        if name in stack:
            chain = " -> ".join((*stack, name))
            raise ConfigError(f"${{{name}}}{at(origin)} refers to itself ({chain})")
        raw = self._raw(name)
        if raw is None:
            return None
        value = self._substitute(raw, origin, (*stack, name))
        self.used[name] = value
        return value

    def substitute(self, text: str, origin: Origin | None = None) -> str:
        """Replace every ``${name}`` / ``${name:default}`` in ``text``.

        :raises ConfigError: an undefined name without a default, naming file:line.
        """
        if "${" not in text:
            return text
        return self._substitute(text, origin, ())

    def _substitute(self, text: str, origin: Origin | None, stack: tuple[str, ...]) -> str:
        out: list[str] = []
        pos = 0
        while (start := text.find("${", pos)) >= 0:
            end, colon = _placeholder_end(text, start)
            if end < 0:
                break  # an unterminated "${" is literal text, as in Spring
            out.append(text[pos:start])
            name = text[start + 2:colon if colon >= 0 else end].strip()
            default = text[colon + 1:end] if colon >= 0 else None
            out.append(self._resolve(name, default, origin, stack))
            pos = end + 1
        out.append(text[pos:])
        return "".join(out)

    def _resolve(self, name: str, default: str | None, origin: Origin | None,
                 stack: tuple[str, ...]) -> str:
        value = self._expand_name(name, origin, stack)
        if value is not None:
            return value
        if default is not None:
            return self._substitute(default, origin, stack)
        raise ConfigError(
            f"${{{name}}}{at(origin)} is not defined; pass -D {name}=VALUE, set it in the "
            f"environment, or write ${{{name}:default}}{suggest(name, self.known_names())}"
        )

    def as_dict(self) -> dict[str, str]:
        """Defaults, file properties, -D values and the names actually used, expanded."""
        out: dict[str, str] = {}
        for name in [*self.defaults, *self.files, *self.defines]:
            try:
                value = self.get(name)
            except ConfigError:
                continue
            if value is not None:
                out[name] = value
        out.update(self.used)
        return out


def _placeholder_end(text: str, start: int) -> tuple[int, int]:
    """Index of the ``}`` closing the ``${`` at ``start`` (nesting allowed in the
    default part) and of the first top-level ``:``; -1 when absent."""
    depth, colon, i = 0, -1, start + 2
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        ch = text[i]
        if ch == "}":
            if depth == 0:
                return i, colon
            depth -= 1
        elif ch == ":" and depth == 0 and colon < 0:
            colon = i
        i += 1
    return -1, colon


# ---------------------------------------------------------------------------
# Java .properties files (credentials.properties)
# ---------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse the ``key=value`` / ``key: value`` format Java's `Properties.load` reads."""
    result: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw_line in text.splitlines():
        line = raw_line.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        if not m:
            continue
        key, value = _unescape(m.group(1)), _unescape(m.group(2))
        if key:
            result[key] = value
    return result
