"""``relaymq passwd``, ``relaymq encrypt`` and ``relaymq decrypt``."""

from __future__ import annotations

import os
import sys

import click

from relaymq_auth import jasypt
from relaymq_auth.passwords import KEY_VARIABLES, hash_password


def _read_secret(prompt: str, stdin: bool) -> str:
    if stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return str(click.prompt(prompt, hide_input=True, confirmation_prompt=True))


@click.command()
@click.option("--password-stdin", is_flag=True, help="read the password from standard input")
@click.option("--cost", default=14, show_default=True, type=click.IntRange(10, 18),
              help="scrypt cost as log2(N); 18 takes 256 MiB per login, the most a "
                   "stored hash may")
def passwd(password_stdin: bool, cost: int) -> None:
    """Print a scrypt hash of a password for users.properties or <authenticationUser>."""
    password = _read_secret("Password", password_stdin)
    if not password:
        raise click.ClickException("an empty password cannot be hashed")
    click.echo(hash_password(password, ln=cost))


def _key(key: str | None) -> str:
    key = key or next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
    if not key:
        raise click.ClickException(f"give --password or set {KEY_VARIABLES[0]}")
    return key


@click.command()
@click.option("--password", "key", help=f"the encryption key (default: ${KEY_VARIABLES[0]})")
@click.option("--input", "value", required=True, help="the text to encrypt")
@click.option("--algorithm", default=jasypt.DES, show_default=True,
              type=click.Choice(jasypt.ALGORITHMS, case_sensitive=False))
def encrypt(key: str | None, value: str, algorithm: str) -> None:
    """Encrypt a value as ActiveMQ's `activemq encrypt` does; use it as ENC(<output>)."""
    click.echo(jasypt.encrypt(value, _key(key), algorithm))


@click.command()
@click.option("--password", "key", help=f"the encryption key (default: ${KEY_VARIABLES[0]})")
@click.option("--input", "value", required=True, help="the base64 text inside ENC(...)")
@click.option("--algorithm", default=jasypt.DES, show_default=True,
              type=click.Choice(jasypt.ALGORITHMS, case_sensitive=False))
def decrypt(key: str | None, value: str, algorithm: str) -> None:
    """Decrypt the inside of an ENC(...) value."""
    try:
        click.echo(jasypt.decrypt(value, _key(key), algorithm))
    except jasypt.EncryptionError as exc:
        raise click.ClickException(str(exc)) from None
