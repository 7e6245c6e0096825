"""Property-based fuzzing of the REST API from its own OpenAPI document
(schemathesis), against a real broker process of its own: whatever the generated
paths, parameters and bodies, no answer is a server error and every answer
matches the document (status codes, content type, response schemas). The number
of examples per operation is bounded so the run stays around half a minute; each
run draws new examples (not derandomized), so CI runs add up."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from relaymq.plugins import QUEUE_TYPES, PluginRegistry
from relaymq_console.openapi import openapi_document

from .conftest import ADMIN, ConsoleBroker

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed")
ignored_auth = pytest.importorskip("schemathesis.specs.openapi.checks").ignored_auth
pytestmark = pytest.mark.slow

#: examples per operation: about half a minute on a quiet machine; RELAYMQ_FUZZ_EXAMPLES=1000
#: for a deeper run
EXAMPLES = int(os.environ.get("RELAYMQ_FUZZ_EXAMPLES", "30"))


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory):
    broker = ConsoleBroker(tmp_path_factory.mktemp("fuzz"))
    try:
        # a few destinations, so generated names sometimes hit real ones
        c = broker.client()
        for name in ("a", "orders", "ActiveMQ.DLQ"):
            assert c.post("/api/v1/queues", json={"name": name}).status_code == 200
            assert c.post(f"/api/v1/queues/{name}/messages",
                          json={"body": "x", "properties": {"n": 1}}).status_code == 200
        yield broker
    finally:
        broker.stop()


# "jms-selector" strings: well-formed selectors (what the document asks for); the
# malformed ones are refused with 400, which test_api checks
_IDENT = st.sampled_from(["n", "region", "JMSPriority", "JMSMessageID", "color"])
_VALUE = st.one_of(st.integers(-5, 5).map(str),
                   st.text("abcé' ", max_size=6).map(lambda t: "'" + t.replace("'", "''") + "'"))
_TERM = st.one_of(
    st.builds(lambda i, o, v: f"{i} {o} {v}", _IDENT, st.sampled_from(["=", "<>"]), _VALUE),
    # an ordering compares numbers only: `n > ''` is malformed (400), as in ActiveMQ
    st.builds(lambda i, o, v: f"{i} {o} {v}", _IDENT, st.sampled_from([">", "<="]),
              st.integers(-5, 5).map(str)),
    st.builds(lambda i, neg: f"{i} IS {'NOT ' if neg else ''}NULL", _IDENT, st.booleans()),
    st.builds(lambda i, a, b: f"{i} BETWEEN {a} AND {b}", _IDENT, st.integers(-3, 0),
              st.integers(0, 3)))
schemathesis.openapi.format("jms-selector", st.builds(
    lambda terms, op: f" {op} ".join(terms), st.lists(_TERM, min_size=1, max_size=3),
    st.sampled_from(["AND", "OR"])))

# the document the console serves (test_the_served_document_is_the_fuzzed_one checks it);
# loaded here rather than from the URL because the broker's port is only known in a fixture
DOCUMENT = openapi_document(PluginRegistry().names(QUEUE_TYPES))  # same packages as the broker
schema = schemathesis.openapi.from_dict(DOCUMENT)
schema.config.update(basic_auth=ADMIN)


@schema.hook
def filter_case(context, case) -> bool:  # type: ignore[no-untyped-def]
    """Leave out a move to the queue it moves from: a 400 the document says in words
    only, since a schema cannot relate the body's `to` to the path's name."""
    if not case.operation.path.endswith("/move") or not isinstance(case.body, dict):
        return True
    to, name = case.body.get("to"), (case.path_parameters or {}).get("name")
    return not (isinstance(to, str) and isinstance(name, str)
                and to.removeprefix("queue://") == name)


def test_the_served_document_is_the_fuzzed_one(fuzz_broker: ConsoleBroker) -> None:
    served = fuzz_broker.client(None).get("/api/v1/openapi.json")
    assert served.status_code == 200 and served.json() == DOCUMENT


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_the_api_answers_every_generated_request_by_its_document(case, fuzz_broker) -> None:
    # ignored_auth sends wrong credentials, which trip the per-address login throttle
    # (429 for everything after five); refusals are checked in test_api instead
    response = case.call_and_validate(base_url=fuzz_broker.url, excluded_checks=[ignored_auth])
    assert response.status_code < 500, response.text  # also one of the checks above
