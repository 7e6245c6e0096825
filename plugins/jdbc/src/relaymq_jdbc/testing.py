"""A throwaway PostgreSQL server for tests, started once per pytest run.

Registered as a pytest plugin (entry point ``pytest11``), so any package's tests
can ask for the session fixture ``postgres`` (a running `PostgresCluster`) or the
function fixture ``postgres_url`` (a SQLAlchemy URL of a fresh, empty database)::

    def test_something(postgres_url: str) -> None:
        engine = sqlalchemy.create_engine(postgres_url)

The cluster is made with Debian's ``initdb``/``pg_ctl`` (package ``postgresql``)
in a temporary directory, listening on a free loopback port and on a Unix socket
in that directory, with trust authentication for one user. PostgreSQL refuses to
run as root, so under root it runs as the ``postgres`` user (``runuser``).
Where the binaries are missing the fixture skips with the reason, unless
``RELAYMQ_REQUIRE_ALL=1`` (set by CI), where it fails: CI must not pass by
skipping.

This module imports nothing heavy: pytest loads it in every run.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

USER = "relaymq"
_counter = itertools.count(1)


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be started here (binaries or a non-root user missing)."""


def find_bindir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are: the newest Debian install, else PATH."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parent.parent.name)
                      if Path(p).parent.parent.name.isdigit() else 0)
    if versions:
        return Path(versions[-1]).parent
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) are not installed; "
        "install Debian's package: apt-get install -y postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One private PostgreSQL server: `start()`, `url(db)`, `create_database()`, `stop()`."""

    def __init__(self, base: Path | None = None, *, fsync: bool = True) -> None:
        self.bindir = find_bindir()
        self.run_as: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable(
                    "running as root and there is no 'postgres' user to run the server as "
                    "(Debian's postgresql package creates it)") from exc
            self.run_as = "postgres"
        self.base = Path(base or tempfile.mkdtemp(prefix="relaymq-pg-"))
        self.data = self.base / "data"
        self.socket_dir = self.base
        self.log = self.base / "postgres.log"
        self.port = _free_port()
        self.fsync = fsync
        self.started = False

    def _cmd(self, *args: str) -> list[str]:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        return [*prefix, *args]

    def _run(self, *args: str) -> None:
        proc = subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise PostgresUnavailable(
                f"{' '.join(args[:2])} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")

    def start(self) -> PostgresCluster:
        if self.run_as:
            os.chmod(self.base, 0o755)
            shutil.chown(self.base, self.run_as, self.run_as)
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", USER,
                  "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
        self.start_server()
        return self

    def start_server(self) -> None:
        """Start the server on the existing data directory (again, after `stop_server`)."""
        opts = (f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                  "-o", opts, "-w", "-t", "60", "start")
        self.started = True

    def stop_server(self, mode: str = "immediate") -> None:
        """Stop the server and keep its data (`start_server` brings it back)."""
        if self.started:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
            self.started = False

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.stop_server()
        self.started = False
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """A SQLAlchemy URL over TCP to `database` as the cluster's superuser."""
        return f"{driver}://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database; returns its name."""
        import psycopg

        name = name or f"t{os.getpid()}_{next(_counter)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(host="127.0.0.1", port=self.port, user=USER,
                                     dbname="postgres", autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                return name
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _require_all() -> bool:
    return os.environ.get("RELAYMQ_REQUIRE_ALL", "") not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A PostgreSQL server for the whole test session (skipped where it cannot run,
    failed instead under RELAYMQ_REQUIRE_ALL=1)."""
    try:
        cluster = PostgresCluster().start()
    except PostgresUnavailable as exc:
        if _require_all():
            pytest.fail(f"RELAYMQ_REQUIRE_ALL=1 and PostgreSQL is unavailable: {exc}")
        pytest.skip(f"PostgreSQL is unavailable: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres: PostgresCluster) -> str:
    """The SQLAlchemy URL of a new, empty database on the session's server."""
    return postgres.url(postgres.create_database())
