"""ActiveMQ 5.17's JDBC store and RelayMQ's jdbcPersistenceAdapter, side by side,
on one private PostgreSQL, over STOMP.

    .venv/bin/python bench/scripts/jdbc_vs_activemq.py [--messages 20000] [--producers 16]
        [--window 16] [--size 1024] [--runs 1] [--only relaymq|activemq] [--sqlite]

What runs (everything private: free ports, temporary directories, killed at the end):

* one PostgreSQL cluster (Debian's `initdb`/`pg_ctl`, fsync on, as the tests'
  `relaymq_jdbc.testing.PostgresCluster`), one database per broker;
* Debian's ActiveMQ 5.17 (`/usr/share/activemq`, never the system service) with a
  private `activemq.xml`: `<jdbcPersistenceAdapter>` on a commons-dbcp
  `BasicDataSource` using Debian's PostgreSQL JDBC driver
  (`libpostgresql-jdbc-java`, `/usr/share/java/postgresql.jar`), JMX off, a STOMP
  connector;
* `relaymq run` with `<jdbcPersistenceAdapter url="postgresql+psycopg://...">`
  and a STOMP connector (`--sqlite`: also a run on a SQLite file).

Load: `--producers` STOMP connections send persistent 1 KiB messages, each
keeping `--window` SENDs with receipts in flight (so the broker sees many
concurrent producers and can group commits), then one consumer drains the queue
(`ack:client-individual`, one ACK per message).

Reported per broker and phase: msg/s, broker CPU µs per message (utime + stime
of the broker process, all threads, from /proc), and for the send phase the
database commits (`pg_stat_database.xact_commit` of the broker's database) and
messages per commit. The CPU ratio ActiveMQ / RelayMQ is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ACTIVEMQ_HOME = Path("/usr/share/activemq")
PG_JAR = Path("/usr/share/java/postgresql.jar")
RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    line = Path(f"/proc/{pid}/stat").read_text()
    rest = line[line.rindex(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited ({proc.returncode}):\n"
                               f"{log.read_text(errors='replace')[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}:\n{log.read_text(errors='replace')[-3000:]}")


@dataclass
class Running:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    database: str | None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start_activemq(base: Path, pg_port: int, db: str) -> Running:
    java = shutil.which("java")
    if java is None or not (ACTIVEMQ_HOME / "bin" / "activemq.jar").exists():
        raise SystemExit("ActiveMQ 5.17 is not installed (apt-get install activemq)")
    if not PG_JAR.exists():
        raise SystemExit(f"{PG_JAR} is missing (apt-get install libpostgresql-jdbc-java)")
    port = free_port()
    (base / "conf").mkdir(parents=True)
    (base / "data").mkdir()
    (base / "conf" / "activemq.xml").write_text(f"""<beans
  xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <bean id="pg-ds" class="org.apache.commons.dbcp.BasicDataSource" destroy-method="close">
    <property name="driverClassName" value="org.postgresql.Driver"/>
    <property name="url" value="jdbc:postgresql://127.0.0.1:{pg_port}/{db}"/>
    <property name="username" value="relaymq"/>
    <property name="password" value=""/>
    <property name="maxActive" value="32"/>
    <property name="poolPreparedStatements" value="true"/>
  </bean>
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="amq-bench"
          dataDirectory="{base}/data" schedulerSupport="false" advisorySupport="false">
    <persistenceAdapter>
      <jdbcPersistenceAdapter dataSource="#pg-ds" createTablesOnStartup="true"/>
    </persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="256 mb"/></memoryUsage>
      <storeUsage><storeUsage limit="8 gb"/></storeUsage>
      <tempUsage><tempUsage limit="1 gb"/></tempUsage>
    </systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>""")
    opens = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in
             ("java.lang", "java.util", "java.net", "java.security", "java.util.concurrent")]
    command = [java, "-Xmx512m", *opens,
               f"-Dactivemq.classpath={base}/conf:{PG_JAR}",
               f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={base}",
               f"-Dactivemq.conf={base}/conf", f"-Dactivemq.data={base}/data",
               "-jar", str(ACTIVEMQ_HOME / "bin" / "activemq.jar"), "start",
               f"xbean:file:{base}/conf/activemq.xml"]
    log = base / "out.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=base)
    wait_port(port, proc, log)
    return Running("ActiveMQ 5.17 JDBC", proc, port, db)


def start_relaymq(base: Path, url: str, db: str | None, label: str) -> Running:
    port = free_port()
    base.mkdir(parents=True)
    config = base / "activemq.xml"
    config.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="relaymq-bench" dataDirectory="{base}/data">
  <persistenceAdapter><jdbcPersistenceAdapter url="{url}"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
  </transportConnectors>
</broker></beans>""")
    log = base / "out.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([RELAYMQ, "run", "--config", str(config)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=base)
    wait_port(port, proc, log)
    return Running(label, proc, port, db)


# -- STOMP load ------------------------------------------------------------------------


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"CONNECT\naccept-version:1.2\nhost:localhost\nlogin:bench\npasscode:bench\n\n\0")
    await read_frame(reader)
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    while True:
        head = await reader.readuntil(b"\n\n")
        head = head.lstrip(b"\r\n")
        if head:
            break
    lines = head.decode().split("\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            headers.setdefault(k, v)
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
        await reader.readexactly(1)
    else:
        body = (await reader.readuntil(b"\0"))[:-1]
    if lines[0] == "ERROR":
        raise RuntimeError(f"ERROR frame: {headers} {body[:200]!r}")
    return lines[0], headers, body


async def produce(port: int, queue: str, count: int, window: int, body: bytes) -> None:
    reader, writer = await connect(port)
    sem = asyncio.Semaphore(window)
    done = asyncio.Event()
    left = count

    async def receipts() -> None:
        nonlocal left
        while left:
            cmd, _h, _b = await read_frame(reader)
            if cmd == "RECEIPT":
                left -= 1
                sem.release()
        done.set()

    task = asyncio.create_task(receipts())
    head = (f"SEND\ndestination:/queue/{queue}\npersistent:true\n"
            f"content-length:{len(body)}\n").encode()
    for i in range(count):
        await sem.acquire()
        writer.write(head + f"receipt:{i}\n\n".encode() + body + b"\0")
    await done.wait()
    await task
    writer.close()


async def consume(port: int, queue: str, count: int) -> None:
    reader, writer = await connect(port)
    writer.write(f"SUBSCRIBE\ndestination:/queue/{queue}\nid:1\nack:client-individual\n"
                 f"activemq.prefetchSize:500\n\n\0".encode())
    got = 0
    while got < count:
        cmd, h, _b = await read_frame(reader)
        if cmd == "MESSAGE":
            got += 1
            writer.write(f"ACK\nid:{h.get('ack', h.get('message-id'))}\n\n\0".encode())
    await writer.drain()
    writer.write(b"DISCONNECT\nreceipt:bye\n\n\0")
    await read_frame(reader)
    writer.close()


def commits(pg_port: int, db: str | None) -> int:
    if db is None:
        return 0
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=pg_port, user="relaymq", dbname="postgres",
                         autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                           (db,)).fetchone()
    return int(row[0]) if row else 0


def stored_rows(pg_port: int, db: str) -> int:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=pg_port, user="relaymq", dbname=db,
                         autocommit=True) as conn:
        # RelayMQ's table is "ACTIVEMQ_MSGS", ActiveMQ's unquoted activemq_msgs
        name = conn.execute("SELECT table_name FROM information_schema.tables "
                            "WHERE lower(table_name) = 'activemq_msgs'").fetchone()
        if name is None:
            return 0
        row = conn.execute(f'SELECT count(*) FROM "{name[0]}"').fetchone()
    return int(row[0]) if row else 0


def wait_empty(pg_port: int, db: str | None, timeout: float = 300) -> None:
    """Until the broker has deleted every acknowledged row (its acks may still be
    in flight to the database when the consumer has seen the last message)."""
    if db is None:
        return
    deadline = time.monotonic() + timeout
    while stored_rows(pg_port, db):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{db}: acknowledged messages still stored after {timeout:.0f} s")
        time.sleep(0.05)


def measure(broker: Running, pg_port: int, args: argparse.Namespace, queue: str) -> dict[str, float]:
    body = (b"x" * args.size)
    per = args.messages // args.producers
    total = per * args.producers
    # warm up (JIT, connection pools, table pages)
    asyncio.run(produce(broker.port, queue + ".warm", min(2000, per), args.window, body))
    asyncio.run(consume(broker.port, queue + ".warm", min(2000, per)))
    wait_empty(pg_port, broker.database)
    time.sleep(1.5)  # the statistics collector flushes about every 0.5 s
    c0, cpu0, t0 = commits(pg_port, broker.database), cpu_seconds(broker.proc.pid), time.monotonic()

    async def send_all() -> None:
        await asyncio.gather(*(produce(broker.port, queue, per, args.window, body)
                               for _ in range(args.producers)))

    asyncio.run(send_all())
    t1, cpu1 = time.monotonic(), cpu_seconds(broker.proc.pid)
    time.sleep(1.5)
    c1 = commits(pg_port, broker.database)
    cpu2, t2 = cpu_seconds(broker.proc.pid), time.monotonic()
    asyncio.run(consume(broker.port, queue, total))
    wait_empty(pg_port, broker.database)
    t3, cpu3 = time.monotonic(), cpu_seconds(broker.proc.pid)
    return {"messages": total, "send_rate": total / (t1 - t0),
            "send_cpu_us": (cpu1 - cpu0) / total * 1e6,
            "commits": c1 - c0, "per_commit": total / max(1, c1 - c0),
            "drain_rate": total / (t3 - t2), "drain_cpu_us": (cpu3 - cpu2) / total * 1e6}


def store_summary(log: Path) -> tuple[float, float] | None:
    """(transactions, store operations) from RelayMQ's line at stop (`N transactions
    carried M store writes (..., K operations)`), warm-up included; None for ActiveMQ."""
    import re

    found = re.findall(r"(\d+) transactions carried \d+ store writes \([\d.]+ per "
                       r"transaction, (\d+) operations\)", log.read_text(errors="replace"))
    return (float(found[-1][0]), float(found[-1][1])) if found else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--producers", type=int, default=16)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", choices=("relaymq", "activemq"))
    ap.add_argument("--sqlite", action="store_true", help="also run RelayMQ on a SQLite file")
    args = ap.parse_args()

    from relaymq_jdbc.testing import PostgresCluster

    work = Path(tempfile.mkdtemp(prefix="relaymq-jdbc-bench-"))
    os.chmod(work, 0o755)  # the server may run as the postgres user (under root)
    (work / "pg").mkdir()
    cluster = PostgresCluster(work / "pg").start()
    results: dict[str, dict[str, float]] = {}
    try:
        plans = []
        if args.only != "activemq":
            plans.append("relaymq")
        if args.only != "relaymq":
            plans.append("activemq")
        if args.sqlite and args.only != "activemq":
            plans.append("sqlite")
        for run in range(args.runs):
            for plan in plans:
                base = work / f"{plan}-{run}"
                if plan == "activemq":
                    db = cluster.create_database(f"amq{run}")
                    broker = start_activemq(base, cluster.port, db)
                elif plan == "relaymq":
                    db = cluster.create_database(f"rmq{run}")
                    broker = start_relaymq(base, cluster.url(db), db, "RelayMQ JDBC (PostgreSQL)")
                else:
                    broker = start_relaymq(base, f"sqlite:///{base}/store.sqlite", None,
                                           "RelayMQ JDBC (SQLite)")
                try:
                    r = measure(broker, cluster.port, args, "bench.jdbc")
                finally:
                    broker.stop()
                summary = store_summary(base / "out.log")
                if summary:
                    r["tx"], r["writes"] = summary
                best = results.get(broker.name)
                if best is None or r["send_cpu_us"] < best["send_cpu_us"]:
                    results[broker.name] = r
                print(f"run {run + 1} {broker.name}: {r['send_rate']:.0f} msg/s sent, "
                      f"{r['send_cpu_us']:.0f} µs CPU/msg, {r['per_commit']:.1f} msg/commit; "
                      f"drain {r['drain_rate']:.0f} msg/s, {r['drain_cpu_us']:.0f} µs CPU/msg",
                      flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.messages} persistent {args.size} B messages, {args.producers} STOMP producers "
          f"x window {args.window}, then one consumer; best of {args.runs} run(s)\n")
    print("| broker | send msg/s | send CPU µs/msg | DB commits | msg/commit | drain msg/s | "
          "drain CPU µs/msg |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        commits_text = f"{r['commits']:.0f}" if r["commits"] else "—"
        per_commit = f"{r['per_commit']:.1f}" if r["commits"] else "—"
        print(f"| {name} | {r['send_rate']:.0f} | {r['send_cpu_us']:.0f} | {commits_text} | "
              f"{per_commit} | {r['drain_rate']:.0f} | {r['drain_cpu_us']:.0f} |")
    print()
    for name, r in results.items():
        if "tx" in r:
            print(f"{name}: over the whole run (warm-up included) {r['tx']:.0f} store "
                  f"transactions carried {r['writes']:.0f} store operations (sends and acks), "
                  f"{r['writes'] / max(1, r['tx']):.1f} per transaction")
    amq = results.get("ActiveMQ 5.17 JDBC")
    rmq = results.get("RelayMQ JDBC (PostgreSQL)")
    if amq and rmq:
        print(f"\nActiveMQ / RelayMQ on PostgreSQL: send CPU per message "
              f"{amq['send_cpu_us'] / rmq['send_cpu_us']:.2f}x, send msg/s "
              f"{rmq['send_rate'] / amq['send_rate']:.2f}x (RelayMQ / ActiveMQ), drain CPU per "
              f"message {amq['drain_cpu_us'] / rmq['drain_cpu_us']:.2f}x")


if __name__ == "__main__":
    main()
