"""The JAAS ``login.config`` file, as ActiveMQ reads it.

```
activemq {
    org.apache.activemq.jaas.PropertiesLoginModule required
        org.apache.activemq.jaas.properties.user="users.properties"
        org.apache.activemq.jaas.properties.group="groups.properties"
        reload=true;
};
```

An entry name, then modules, each a class name, a control flag (``required``,
``requisite``, ``sufficient``, ``optional``) and ``key=value`` options ending in
``;``. Comments are ``//``, ``/* */`` and ``#`` lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s+|//[^\n]*|#[^\n]*|/\*.*?\*/|"((?:[^"\\]|\\.)*)"|([{};=])|([^\s{};="]+)', re.S)


class LoginConfigError(ValueError):
    """A login.config that does not parse; names the file and line."""


@dataclass(slots=True)
class ModuleConfig:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def short_name(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]


def _tokens(text: str, where: str) -> list[tuple[str, str, int]]:
    """(kind, value, line): kind is 'str' (quoted), 'sym' or 'word'."""
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise LoginConfigError(f"{where}:{line}: cannot read {text[pos:pos + 20]!r}")
        line = text.count("\n", 0, pos) + 1
        if m.group(1) is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group(1)), line))
        elif m.group(2) is not None:
            out.append(("sym", m.group(2), line))
        elif m.group(3) is not None:
            out.append(("word", m.group(3), line))
        pos = m.end()
    return out


def parse_login_config(text: str, where: str = "login.config") -> dict[str, list[ModuleConfig]]:
    """Entry name -> its modules in order.

    :raises LoginConfigError: with file:line.
    """
    toks = _tokens(text, where)
    entries: dict[str, list[ModuleConfig]] = {}
    i = 0

    def expect(kind: str, value: str | None = None) -> tuple[str, str, int]:
        nonlocal i
        if i >= len(toks):
            raise LoginConfigError(f"{where}: unexpected end of file, expected {value or kind}")
        tok = toks[i]
        if tok[0] != kind and not (kind == "word" and tok[0] == "str") or (
                value is not None and tok[1] != value):
            raise LoginConfigError(f"{where}:{tok[2]}: expected {value or kind}, found {tok[1]!r}")
        i += 1
        return tok

    while i < len(toks):
        _, name, line = expect("word")
        if name in entries:
            raise LoginConfigError(f"{where}:{line}: entry {name!r} appears twice")
        expect("sym", "{")
        modules: list[ModuleConfig] = []
        while i < len(toks) and toks[i][1] != "}":
            _, cls, mline = expect("word")
            _, flag, fline = expect("word")
            if flag.lower() not in FLAGS:
                raise LoginConfigError(f"{where}:{fline}: {flag!r} is not a control flag "
                                       f"({', '.join(FLAGS)})")
            module = ModuleConfig(cls, flag.lower(), line=mline)
            while i < len(toks) and toks[i][1] != ";":
                _, key, _ = expect("word")
                expect("sym", "=")
                _, value, _ = expect("word")
                module.options[key] = value
            expect("sym", ";")
            modules.append(module)
        expect("sym", "}")
        if i < len(toks) and toks[i][1] == ";":
            i += 1
        entries[name] = modules
    return entries


def find_login_config(explicit: str | None, config_file: str | None,
                      environ: dict[str, str]) -> Path | None:
    """Where login.config is: the element's ``loginConfig``, then
    ``RELAYMQ_LOGIN_CONFIG`` / ``JAVA_SECURITY_AUTH_LOGIN_CONFIG``, then
    ``login.config`` beside the activemq.xml (ActiveMQ's ``conf/``)."""
    for candidate in (explicit, environ.get("RELAYMQ_LOGIN_CONFIG"),
                      environ.get("JAVA_SECURITY_AUTH_LOGIN_CONFIG")):
        if candidate:
            return Path(candidate)
    if config_file and config_file not in ("<memory>", ""):
        beside = Path(config_file).resolve().parent / "login.config"
        if beside.exists():
            return beside
    return None
