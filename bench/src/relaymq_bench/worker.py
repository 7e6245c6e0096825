"""Entry point of one producer or consumer process (``python -m relaymq_bench.worker CFG``).

Why separate processes: N producers and M consumers must not share one GIL,
or the client would saturate long before the broker.  The coordinator passes
a JSON config as argv[1]; the worker connects and attaches/subscribes, prints
``{"event": "ready"}``, waits for "go" on stdin, runs its hot loop, and
prints one ``{"event": "result", ...}`` line.  Client CPU is measured with
``getrusage`` around the hot loop only, so interpreter start-up and
connection setup are not billed to messages.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import traceback
import zlib
from array import array
from typing import Any

from . import payload
from .amqp_client import AmqpClient, ClientStats, LinkOptions
from .amqp_codec import TransferTemplate
from .checker import SequenceChecker
from .control import Control, emit
from .stomp_client import StompClient
from .stomp_codec import SendTemplate

MAX_LATENCY_SAMPLES = 2_000_000


def encode_latencies(lat: array) -> dict[str, Any]:
    """zlib+base64 of int64 nanoseconds; strided down if huge (percentiles stay valid)."""
    stride = max(1, -(-len(lat) // MAX_LATENCY_SAMPLES))
    kept = lat[::stride] if stride > 1 else lat
    return {"count": len(lat), "stride": stride,
            "data": base64.b64encode(zlib.compress(kept.tobytes(), 1)).decode("ascii")}


def decode_latencies(blob: dict[str, Any]) -> array:
    out = array("q")
    out.frombytes(zlib.decompress(base64.b64decode(blob["data"])))
    return out


def _stats_dict(st: ClientStats) -> dict[str, Any]:
    return {"t_go": st.t_go, "t_first": st.t_first, "t_last": st.t_last,
            "cpu_user": st.cpu_user, "cpu_sys": st.cpu_sys, "io": st.extra}


def _amqp_client(cfg: dict[str, Any]) -> tuple[AmqpClient, LinkOptions]:
    client = AmqpClient(cfg["host"], cfg["port"], cfg.get("user"), cfg.get("password"),
                        cfg.get("vhost"))
    link = cfg["link"]
    opts = LinkOptions(link["address"], link.get("durable", 0),
                       tuple(link.get("capabilities", ())), link.get("expiry_policy"))
    return client, opts


def _stomp_client(cfg: dict[str, Any]) -> StompClient:
    return StompClient(cfg["host"], cfg["port"], cfg.get("user"), cfg.get("password"),
                       cfg.get("vhost") or "/")


def run_producer(cfg: dict[str, Any], control: Control) -> dict[str, Any]:
    body = payload.make_body(cfg["size"], cfg["run_id"], cfg["index"])
    count, duration, rate = cfg.get("count"), cfg.get("duration"), cfg.get("rate")
    nap = cfg.get("nap", 0.0)
    st: ClientStats
    if cfg["protocol"] == "amqp":
        aclient, opts = _amqp_client(cfg)
        aclient.attach_sender(opts)
        template = TransferTemplate(aclient.handle, body, payload.SEQ_OFFSET, cfg["persistent"],
                                    aclient.remote_max_frame)
        emit("ready")
        aclient.wait_go(control)
        st = aclient.produce(template, count, duration, rate, cfg["max_inflight"], cfg["batch"],
                             control, nap)
        aclient.close()
    else:
        sclient = _stomp_client(cfg)
        stpl = SendTemplate(cfg["address"], body, cfg["persistent"], cfg.get("headers"))
        emit("ready")
        sclient.wait_go(control)
        st = sclient.produce(stpl, count, duration, rate, cfg["max_inflight"], cfg["batch"],
                             cfg["receipt_every"], control, nap)
        sclient.close()
    return {"role": "producer", "index": cfg["index"], "sent": st.sent, "accepted": st.accepted,
            "rejected": st.rejected, "released": st.released, "other": st.other_outcomes,
            **_stats_dict(st)}


def run_consumer(cfg: dict[str, Any], control: Control) -> dict[str, Any]:
    checker = SequenceChecker(cfg["run_id"], cfg.get("count") or 0)
    latencies = array("q")
    expect = cfg.get("expect")
    progress = cfg.get("progress_interval")
    nap = cfg.get("nap", 0.0)
    st: ClientStats
    if cfg["protocol"] == "amqp":
        aclient, opts = _amqp_client(cfg)
        aclient.attach_receiver(opts, presettled=cfg.get("ack") == "auto")
        emit("ready")
        expect = _expect_from(aclient.wait_go(control), expect)
        st = aclient.consume(checker, cfg["credit"], expect, control, progress, latencies, nap,
                             individual=cfg.get("ack") == "client-individual")
        aclient.close()
    else:
        sclient = _stomp_client(cfg)
        if cfg.get("subscribe_early"):
            sclient.subscribe(cfg["address"], cfg["credit"], cfg.get("ack", "client"),
                              extra_headers=cfg.get("headers"))
        emit("ready")
        expect = _expect_from(sclient.wait_go(control), expect)
        st = sclient.consume(checker, cfg["address"], cfg["credit"], cfg.get("ack", "client"),
                             expect, control, progress, latencies, nap, cfg.get("headers"),
                             ack_receipt_every=cfg.get("ack_receipt_every", 0))
        sclient.close()
    return {"role": "consumer", "index": cfg["index"], "received": st.sent,
            "check": checker.to_json(), "latency": encode_latencies(latencies),
            **_stats_dict(st)}


def _expect_from(cmds: list[str], expect: int | None) -> int | None:
    for cmd in cmds:
        if cmd.startswith("expect "):
            expect = int(cmd.split()[1])
    return expect


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cfg = json.loads(argv[0])
    control = Control()
    profile_dir = os.environ.get("RELAYMQ_BENCH_PROFILE")
    profiler = None
    if profile_dir:  # debugging aid: where does a worker's CPU go?
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        if cfg["role"] == "producer":
            result = run_producer(cfg, control)
        else:
            result = run_consumer(cfg, control)
    except SystemExit as exc:
        emit("error", message=str(exc))
        return 1
    except Exception as exc:  # report, don't die silently: the coordinator shows this
        emit("error", message=f"{type(exc).__name__}: {exc}",
             traceback=traceback.format_exc(limit=5))
        return 1
    if profiler is not None and profile_dir:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        with open(os.path.join(profile_dir, f"{cfg['role']}-{cfg['index']}.txt"), "w") as fh:
            fh.write(text.getvalue())
    emit("result", **result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
