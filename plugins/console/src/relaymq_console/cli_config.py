"""Where the admin commands find the console and their credentials: the kernel's
`relaymq.cli_config`, shared with ``relaymq bridge`` (relaymq-bridge)."""

from relaymq.cli_config import DEFAULT_URL, KEYS, config_option, remember, resolve

__all__ = ["DEFAULT_URL", "KEYS", "config_option", "remember", "resolve"]
