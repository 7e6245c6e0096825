"""The suite on two pytest-xdist workers (relaymq.testing.parallel): a peer starts once
per run, a module's tests stay on one worker, the counts by kind still add up, and
workers never pick the same port."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from relaymq.testing import net
from relaymq.testing.parallel import scope_of, unit_order

CONFTEST = '''
import os, time
import pytest

LOG = os.environ["PARALLEL_LOG"]

def note(*words):
    with open(LOG, "a") as f:
        f.write(" ".join(words + (os.environ.get("PYTEST_XDIST_WORKER", "-"),)) + "\\n")

@pytest.fixture(scope="session")
def postgres():
    note("start", "postgres")
    yield "pg"

@pytest.fixture(scope="session")
def spark():
    note("start", "spark")
    yield "spark"

@pytest.fixture
def postgres_url(postgres):
    return postgres + "/db"

@pytest.fixture(scope="module")
def shared(request):
    note("module", request.module.__name__)
    return request.module.__name__
'''

PEER_TESTS = {
    "test_pg_a.py": "def test_one(postgres_url):\n    note('ran', 'pg', 'a')\n\n"
                    "def test_two(postgres):\n    note('ran', 'pg', 'a')\n\n"
                    "def test_plain_in_pg_module():\n    note('ran', 'pg', 'a')\n",
    "test_pg_b.py": "def test_three(postgres):\n    note('ran', 'pg', 'b')\n",
    "test_spark_a.py": "def test_session(spark):\n    note('ran', 'spark', 'a')\n",
    "test_spark_b.py": "import pytest\n\n@pytest.mark.spark\n"
                       "def test_marked_only():\n    note('ran', 'spark', 'b')\n",
}


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    spark: starts Spark\n")
    (project / "conftest.py").write_text(CONFTEST)
    for name, body in PEER_TESTS.items():
        (project / name).write_text("from conftest import note\n\n" + body)
    for i in range(6):
        (project / f"test_plain_{i}.py").write_text(textwrap.dedent(f"""\
            import socket, subprocess, sys, time
            from conftest import note

            def test_a(shared):
                time.sleep(0.2)
                note("ran", "plain", "{i}")

            def test_b(shared):
                note("ran", "plain", "{i}")

            def test_process(shared):
                subprocess.run([sys.executable, "-c", "pass"], check=True)
                note("ran", "plain", "{i}")
            """))
    return project


def _run(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    log = project / "log.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RELAYMQ_"))}
    env["PARALLEL_LOG"] = str(log)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=180)
    lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return done, lines


def test_two_workers_start_each_peer_once_and_keep_modules_together(tmp_path: Path) -> None:
    done, lines = _run(_project(tmp_path), "-n", "2", "--dist", "loadgroup", "--test-kinds")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "24 passed" in done.stdout, done.stdout

    starts = Counter(words[1] for words in lines if words[0] == "start")
    assert starts == {"postgres": 1, "spark": 1}
    workers_of: dict[str, set[str]] = defaultdict(set)
    for words in lines:
        if words[0] == "ran":
            workers_of[f"{words[1]}-{words[2]}"].add(words[3])
            workers_of[words[1] if words[1] != "plain" else f"plain-{words[2]}"].add(words[3])
    # every test of a peer's modules (the plain one in test_pg_a.py too) ran on one worker
    assert len(workers_of["pg"]) == 1 and len(workers_of["spark"]) == 1
    for i in range(6):
        assert len(workers_of[f"plain-{i}"]) == 1
    # a module's fixture was made once: the module went to one worker as a whole
    modules = Counter(words[1] for words in lines if words[0] == "module")
    assert modules == {f"test_plain_{i}": 1 for i in range(6)}
    # both workers ran tests
    assert {w for words in lines if words[0] == "ran" for w in words[3:]} == {"gw0", "gw1"}
    # the controller counted the workers' tests by kind: 6 started a process
    total = next(line for line in done.stdout.splitlines() if line.startswith("total"))
    assert total.split()[1:] == ["18", "0", "6"], done.stdout


def test_the_same_project_in_one_process_runs_the_same_tests(tmp_path: Path) -> None:
    done, lines = _run(_project(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "24 passed" in done.stdout
    assert Counter(words[1] for words in lines if words[0] == "start") == {"postgres": 1,
                                                                           "spark": 1}


def test_units_go_out_peers_first_then_modules_last_collected_first() -> None:
    units = {"plugins/jdbc/tests/test_s.py": "postgres", "plugins/jdbc/tests/test_t.py": "postgres",
             "plugins/spark/tests/test_j.py": "spark", "plugins/spark/tests/test_k.py": "spark"}
    collection = [
        "core/tests/test_a.py::test_1",
        "core/tests/test_a.py::test_2",
        "plugins/jdbc/tests/test_s.py::test_1",
        "plugins/x/tests/test_b.py::T::test_1",
        "plugins/spark/tests/test_j.py::test_1",
        "plugins/jdbc/tests/test_t.py::test_1[x]",
        "tests/test_c.py::test_1[a@b]",
        "plugins/spark/tests/test_k.py::test_1",
    ]
    scopes = list(dict.fromkeys(scope_of(n, units) for n in collection))
    assert scopes == ["core/tests/test_a.py", "@postgres", "plugins/x/tests/test_b.py", "@spark",
                      "tests/test_c.py"]
    assert unit_order(scopes) == ["@spark", "@postgres", "tests/test_c.py",
                                  "plugins/x/tests/test_b.py", "core/tests/test_a.py"]


def test_peers_used_together_are_one_unit(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "test_both.py").write_text("def test_both(postgres, spark):\n    pass\n")
    done, lines = _run(project, "-n", "2", "--dist", "loadgroup")
    assert done.returncode == 0, done.stdout + done.stderr
    assert Counter(words[1] for words in lines if words[0] == "start") == {"postgres": 1,
                                                                           "spark": 1}
    assert len({words[3] for words in lines if words[:2] in (["ran", "pg"], ["ran", "spark"])}) == 1


def test_workers_pick_ports_from_slices_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    slices = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        low, high = net.worker_slice()
        assert net.LOW <= low < high <= net.HIGH < 32768  # below the ephemeral range
        picked = [net.free_port() for _ in range(50)]
        assert all(low <= p <= high for p in picked)
        assert len(set(picked)) == 50  # not handed out twice before the slice goes round
        slices.append((low, high))
    (low0, high0), (low1, high1) = slices
    assert high0 < low1
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert net.worker_slice() == (net.LOW, net.HIGH)


def test_a_port_in_use_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setattr(net, "_next", {})
    first = net.free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        net._next.clear()
        monkeypatch.setattr(net.random, "randrange", lambda size: first - net.worker_slice()[0])
        port = net.free_port()
        low, high = net.worker_slice()
        assert port != first and low <= port <= high


DYNAMIC = '''import pytest
from conftest import note

@pytest.mark.external{args}
def test_dynamic(request):
    request.getfixturevalue("postgres")
    note("ran", "pg", "dynamic")
'''


def test_a_peer_reached_through_getfixturevalue_must_be_named(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "test_dynamic.py").write_text(DYNAMIC.format(args=""))
    done, _ = _run(project, "test_dynamic.py")
    assert done.returncode == 1, done.stdout
    assert ('starts the peer(s) postgres through request.getfixturevalue: name them, '
            '@pytest.mark.external("postgres")') in done.stdout

    (project / "test_dynamic.py").write_text(DYNAMIC.format(args="").replace(
        "@pytest.mark.external\n", ""))
    done, _ = _run(project, "test_dynamic.py")
    assert done.returncode == 1 and "is not marked @pytest.mark.external" in done.stdout


def test_a_named_peer_joins_its_unit(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "test_dynamic.py").write_text(DYNAMIC.format(args='("postgres")'))
    done, lines = _run(project, "-n", "2", "--dist", "loadgroup")
    assert done.returncode == 0, done.stdout + done.stderr
    assert Counter(words[1] for words in lines if words[0] == "start")["postgres"] == 1
    assert len({words[3] for words in lines if words[:2] == ["ran", "pg"]}) == 1
    assert ["ran", "pg", "dynamic"] in [words[:3] for words in lines]
