"""Spring data-source beans and JDBC URLs -> SQLAlchemy URLs.

ActiveMQ's JDBC store takes a `javax.sql.DataSource` bean. The common kinds are
translated here, so the `<bean>` in an existing activemq.xml keeps working:

* PostgreSQL's `PGPoolingDataSource`, `PGSimpleDataSource` and
  `PGConnectionPoolDataSource` (`serverName`, `portNumber`, `databaseName`,
  `user`, `password`, or a `url`);
* Apache Commons DBCP `BasicDataSource` (1 and 2) with a JDBC `url`
  (`jdbc:postgresql://...`, `jdbc:sqlite:...`, `jdbc:derby:...`), `username`, `password`;
* Derby's embedded data sources, which become a SQLite file (an embedded
  database in the data directory, as Derby was).

Anything else is refused with the list of what is supported.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from relaymq.config.model import PluginElement
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

PG_DRIVER = "postgresql+psycopg"

POSTGRES_CLASSES = (
    "org.postgresql.ds.PGPoolingDataSource",
    "org.postgresql.ds.PGSimpleDataSource",
    "org.postgresql.ds.PGConnectionPoolDataSource",
)
DBCP_CLASSES = (
    "org.apache.commons.dbcp.BasicDataSource",
    "org.apache.commons.dbcp2.BasicDataSource",
)
DERBY_CLASSES = (
    "org.apache.derby.jdbc.EmbeddedDataSource",
    "org.apache.derby.jdbc.EmbeddedDataSource40",
    "org.apache.derby.iapi.jdbc.EmbeddedDataSourceInterface",
)
SUPPORTED = POSTGRES_CLASSES + DBCP_CLASSES + DERBY_CLASSES


class DataSourceError(ValueError):
    """A data source RelayMQ cannot translate (the message says what to write instead)."""


def bean_properties(bean: PluginElement) -> dict[str, str]:
    """`<property name="x" value="y"/>` and `<property name="x"><value>y</value></property>`."""
    out: dict[str, str] = {}
    for prop in bean.children_named("property"):
        name = prop.attributes.get("name", "")
        if not name:
            continue
        if "value" in prop.attributes:
            out[name] = prop.attributes["value"]
        else:
            value = prop.child("value")
            out[name] = value.text if value is not None else prop.text
    return out


def _where(bean: PluginElement) -> str:
    cls = bean.attributes.get("class", "")
    where = f" at {bean.origin}" if bean.origin.line else ""
    return f"<bean id=\"{bean.attributes.get('id', '')}\" class=\"{cls}\">{where}"


def url_from_bean(bean: PluginElement, data_dir: Path) -> URL:
    """The SQLAlchemy URL a data-source bean describes."""
    cls = bean.attributes.get("class", "").strip()
    props = bean_properties(bean)
    try:
        if cls in POSTGRES_CLASSES:
            if props.get("url"):
                url = url_from_jdbc(props["url"], data_dir)
                return _with_credentials(url, props.get("user"), props.get("password"))
            host = props.get("serverName") or _first(props.get("serverNames")) or "localhost"
            port = props.get("portNumber") or _first(props.get("portNumbers"))
            return URL.create(PG_DRIVER, username=props.get("user") or None,
                              password=props.get("password") or None, host=host,
                              port=int(port) if port and port != "0" else None,
                              database=props.get("databaseName") or None)
        if cls in DBCP_CLASSES:
            if not props.get("url"):
                raise DataSourceError("a BasicDataSource needs a url property "
                                      "(e.g. jdbc:postgresql://localhost/activemq)")
            url = url_from_jdbc(props["url"], data_dir)
            return _with_credentials(url, props.get("username"), props.get("password"))
        if cls in DERBY_CLASSES:
            return derby_url(props.get("databaseName") or "derbydb", data_dir)
    except DataSourceError as exc:
        raise DataSourceError(f"{_where(bean)}: {exc}") from None
    raise DataSourceError(
        f"{_where(bean)}: data source class '{cls}' is not supported; supported: "
        f"{', '.join(SUPPORTED)}; or write url=\"postgresql+psycopg://user:password@host/db\" "
        "on <jdbcPersistenceAdapter>")


def url_from_jdbc(jdbc: str, data_dir: Path) -> URL:
    """`jdbc:postgresql://h:5432/db?user=u`, `jdbc:sqlite:/path`, `jdbc:derby:name;...`."""
    text = jdbc.strip()
    if not text.startswith("jdbc:"):
        raise DataSourceError(f"url '{jdbc}' is not a JDBC URL (jdbc:postgresql://host/db)")
    rest = text[len("jdbc:"):]
    kind, _, tail = rest.partition(":")
    if kind == "postgresql":
        if not tail.startswith("//"):  # jdbc:postgresql:db
            tail = "//localhost/" + tail
        parts = urlsplit("x:" + tail)
        query = dict(parse_qsl(parts.query))
        return URL.create(PG_DRIVER, username=query.pop("user", None),
                          password=query.pop("password", None), host=parts.hostname or "localhost",
                          port=parts.port, database=parts.path.lstrip("/") or None)
    if kind == "sqlite":
        path = tail[len("//"):] if tail.startswith("//") else tail
        return URL.create("sqlite", database=path if path and path != ":memory:" else None)
    if kind == "derby":
        name = tail.split(";", 1)[0]
        if name.startswith("memory:"):
            raise DataSourceError("an in-memory Derby database keeps nothing; use "
                                  "<memoryPersistenceAdapter/> instead")
        return derby_url(name, data_dir)
    raise DataSourceError(
        f"JDBC URL '{jdbc}': the '{kind}' database is not supported; supported: "
        "jdbc:postgresql:, jdbc:sqlite:, jdbc:derby: (embedded, run as SQLite)")


def derby_url(name: str, data_dir: Path) -> URL:
    """An embedded Derby database becomes a SQLite file of the same name."""
    path = Path(name)
    if not path.is_absolute():
        path = data_dir / path
    return URL.create("sqlite", database=str(path.with_name(path.name + ".sqlite")))


def parse_url(text: str) -> URL:
    """A SQLAlchemy URL from `url=`; `jdbc:` URLs are translated too."""
    if text.strip().startswith("jdbc:"):
        return url_from_jdbc(text, Path("."))
    try:
        url = make_url(text.strip())
    except ArgumentError as exc:
        raise DataSourceError(f"url=\"{text}\" is not a database URL ({exc}); e.g. "
                              "postgresql+psycopg://user:password@localhost/activemq or "
                              "sqlite:///data/activemq.sqlite") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername=PG_DRIVER)
    if url.get_backend_name() not in ("postgresql", "sqlite"):
        raise DataSourceError(f"url=\"{text}\": the '{url.get_backend_name()}' database is not "
                              "supported; RelayMQ's JDBC store runs on PostgreSQL and SQLite")
    return url


def _with_credentials(url: URL, user: str | None, password: str | None) -> URL:
    if user:
        url = url.set(username=user)
    if password:
        url = url.set(password=password)
    return url


def _first(value: str | None) -> str | None:
    return value.split(",")[0].strip() if value else None
