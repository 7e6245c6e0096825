"""Where the admin commands (relaymq-console's ``relaymq queue|dlq|connection|dstat``,
relaymq-bridge's ``relaymq bridge list|status|start|stop|pause|resume``) find the
console and their credentials.

Each of `url`, `user` and `password` comes from, first to last: the command's option,
its environment variable (RELAYMQ_CONSOLE_URL, RELAYMQ_USER, RELAYMQ_PASSWORD), the
TOML file given by `--config` (or RELAYMQ_CLI_CONFIG, else ~/.config/relaymq/cli.toml
when it exists), then the default URL http://127.0.0.1:8161:

    url = "https://broker1:8161"
    user = "ops"
    password = "..."
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import click

DEFAULT_URL = "http://127.0.0.1:8161"
KEYS = ("url", "user", "password")
_META = "relaymq_cli_config"


def remember(ctx: click.Context, _param: Any, value: str | None) -> None:
    """`--config`'s callback: kept for `resolve`."""
    if value is not None:
        ctx.meta[_META] = value


def config_option(f: Any) -> Any:
    return click.option("--config", "cli_config", envvar="RELAYMQ_CLI_CONFIG", expose_value=False,
                        callback=remember, type=click.Path(dir_okay=False),
                        help="TOML file with url, user, password "
                             "(default ~/.config/relaymq/cli.toml).")(f)


def _file(explicit: str | None) -> dict[str, Any]:
    if explicit is not None:
        path = Path(explicit)
    else:
        path = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "relaymq" / "cli.toml"
        if not path.is_file():
            return {}
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise click.ClickException(f"{path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise click.ClickException(f"{path}: unknown setting(s) {', '.join(unknown)}; "
                                   f"known: {', '.join(KEYS)}")
    for key in KEYS:
        if key in data and not isinstance(data[key], str):
            raise click.ClickException(f"{path}: {key} must be a string")
    return data


def resolve(url: str | None, user: str | None,
            password: str | None) -> tuple[str, str | None, str | None]:
    """The options (and their environment variables) first, then the file."""
    ctx = click.get_current_context(silent=True)
    explicit = ctx.meta.get(_META) if ctx is not None else None
    if url is not None and user is not None and password is not None and explicit is None:
        return url, user, password
    data = _file(explicit)
    return (url or data.get("url") or DEFAULT_URL, user or data.get("user"),
            password or data.get("password"))
