"""`load_config`: a config file (activemq.xml-style XML or its YAML form) -> `BrokerConfig`.

This is the whole pipeline: parse (hardened, with line numbers) into a neutral
tree, build the typed model with `${}` substitution, collect every error and
warning, then raise one `ConfigError` listing all errors, or return the config
with its warnings in ``BrokerConfig.warnings`` (and logged).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from relaymq.config.broker_builder import build
from relaymq.config.context import BuildContext
from relaymq.config.model import BrokerConfig
from relaymq.config.properties import Properties
from relaymq.config.report import Report
from relaymq.config.tree import Node
from relaymq.config.xml_loader import MAX_BYTES, parse_xml, too_large_message
from relaymq.config.yaml_loader import parse_yaml
from relaymq.errors import ConfigError

FORMATS = {".xml": "xml", ".yaml": "yaml", ".yml": "yaml"}


def detect_format(path: Path, text: bytes) -> str:
    """By extension; otherwise XML when the first non-blank character is ``<``."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt:
        return fmt
    return "xml" if text.lstrip().startswith(b"<") else "yaml"


def load_config(
    path: str | Path,
    properties: dict[str, str] | None = None,
    strict: bool = False,
    *,
    env: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Load an activemq.xml-style XML or YAML file.

    :param path: the file; ``.xml``, ``.yaml``/``.yml``, or sniffed from its content.
    :param properties: ``-D name=value`` definitions for ``${name}`` substitution.
    :param strict: unknown elements/attributes (and other warnings) become errors.
    :param env: the environment to read ``ACTIVEMQ_*`` and ``${VAR}`` from (default
        ``os.environ``).
    :raises ConfigError: listing every error with its file:line.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:  # refused before reading it
            raise ConfigError(f"{path}: {too_large_message(size)}")
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {p}: {exc.strerror}") from exc
    fmt = detect_format(p, data)
    return load_config_text(
        data, fmt, properties, strict, filename=str(path), env=env,
        conf_dir=p.resolve().parent,
    )


def load_config_text(
    text: str | bytes,
    fmt: str = "xml",
    properties: dict[str, str] | None = None,
    strict: bool = False,
    *,
    filename: str = "<text>",
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    conf_dir: Path | None = None,
) -> BrokerConfig:
    """Load a config from a string: ``fmt`` is ``"xml"`` or ``"yaml"`` (``"yml"``).

    :param filename: what error messages call the document (``activemq.xml:14``).
    :param base_dir: ``${activemq.base}`` (default: the working directory).
    :param conf_dir: ``${activemq.conf}`` (default: ``${activemq.base}/conf``).
    Other parameters as in `load_config`.
    """
    fmt = fmt.lower().lstrip(".")
    root: Node
    if fmt == "xml":
        root = parse_xml(text, filename)
    elif fmt in ("yaml", "yml"):
        root = parse_yaml(text, filename)
    else:
        raise ConfigError(f"unknown config format '{fmt}'; use xml or yaml")
    report = Report(strict=strict)
    props = Properties(properties, env=env, base_dir=base_dir, conf_dir=conf_dir)
    config = build(BuildContext(props, report), root, filename)
    config.properties = props.as_dict()
    config.warnings = list(report.warnings)
    config.notes = list(report.notes)
    try:
        report.raise_if_errors()
    except ConfigError as exc:
        # What could be built despite the errors, so `config check` can also
        # report the plugins it names; never run a broker from it.
        exc.partial_config = config  # type: ignore[attr-defined]
        raise
    return config
