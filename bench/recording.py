"""Reading a recording: a0py's planner and reader against the ``mcap``
package's reader, on the same file, in the same run.

    python bench/recording.py                 # 1 M frames of 64 B, 5 repeats (about a minute on 2 cores)
    python bench/recording.py --frames 200000 --repeats 3

The file is what ``a0py record`` writes (bench/spark.py's make_recording:
4 topics, zstd chunks of 4 MiB with message indexes and a summary). Medians
of --repeats runs, the two readers alternating run by run:

  plan       the chunks of the complete file (byte ranges, time ranges,
             channels, counts): ``a0py.recording.reader.read_layout`` against
             ``mcap.reader.make_reader(f).get_summary()``; both read the
             summary only;
  plan cut   the same file cut short at 70 % (no summary, as a SIGKILLed
             recorder leaves it): read_layout's scan of record headers
             against ``mcap.stream_reader.StreamReader(f,
             emit_chunks=True)``, which reads every chunk's bytes (without
             decompressing them) until the partial record ends it;
  read       every message: ``a0py.spark.read_table`` (Arrow columns topic,
             seq, times, headers map, payload, built from the chunks' byte
             offsets) against ``make_reader(f).iter_messages()`` touching
             each message's data (the floor of any reader built on it; by
             default in log-time order, and with ``log_time_order=False``
             in file order), and against the same rows built from it in file
             order (each packet decoded by ``a0py.Packet.from_bytes``,
             columns made with pyarrow).

This is a script: it asserts nothing.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if __package__ in (None, ""):
    sys.path.insert(0, REPO)
    sys.path.insert(0, HERE)

from mcap.reader import make_reader
from mcap.records import Chunk
from mcap.stream_reader import StreamReader
from spark import make_recording

import a0py
from a0py.recording.reader import read_layout
from a0py.spark import read_table


def plan_ours(path):
    return len(read_layout(path).chunks)


def plan_mcap(path):
    with open(path, "rb") as f:
        return len(make_reader(f).get_summary().chunk_indexes)


def plan_cut_mcap(path):
    """Every chunk record of a file without a summary, read in order until
    the partial record at its end; returns (chunks, bytes read)."""
    chunks = 0
    with open(path, "rb") as f:
        try:
            for record in StreamReader(f, emit_chunks=True).records:
                chunks += isinstance(record, Chunk)
        except Exception:  # noqa: BLE001 - the cut record ends the stream (EndOfFile or a short read)
            pass
        return chunks, f.tell()


def read_ours(path):
    return read_table(path).num_rows


def read_mcap(path, log_time_order=True):
    n = 0
    with open(path, "rb") as f:
        for _schema, _channel, message in make_reader(f).iter_messages(log_time_order=log_time_order):
            n += len(message.data) > 0
    return n


def read_mcap_rows(path):
    """The read_table rows (topic, seq, times, headers, payload) built from
    the mcap package's reader, one message at a time."""
    import pyarrow as pa

    topics, seqs, monos, walls, headers, payloads = [], [], [], [], [], []
    with open(path, "rb") as f:
        for _schema, channel, message in make_reader(f).iter_messages(log_time_order=False):
            if channel.message_encoding != "a0py/packet":
                continue
            pkt = a0py.Packet.from_bytes(message.data)
            h = pkt.headers
            topics.append(channel.topic)
            seqs.append(int(h["a0_transport_seq"]))
            monos.append(int(h["a0_time_mono"]))
            walls.append(message.publish_time // 1000)
            headers.append(list(h.items()))
            payloads.append(bytes(pkt.payload))
    table = pa.table({
        "topic": pa.array(topics, pa.string()), "seq": pa.array(seqs, pa.int64()),
        "time_mono": pa.array(monos, pa.int64()),
        "time_wall": pa.array(walls, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "headers": pa.array(headers, pa.map_(pa.string(), pa.string())), "payload": pa.array(payloads, pa.binary()),
    })
    return table.num_rows


def alternate(fns, repeats):
    """Runs each of ``fns`` once per round, ``repeats`` rounds; {name: [seconds]}."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="a0py-bench-recording-")
    results = {"args": vars(args), "cpus": os.cpu_count()}
    try:
        disk = make_recording(work, args.frames, args.payload)
        path = os.path.join(work, "a0py_00000.mcap")
        cut = os.path.join(work, "cut.mcap")
        with open(path, "rb") as src, open(cut, "wb") as dst:
            dst.write(src.read(int(os.path.getsize(path) * 0.7)))
        assert read_ours(path) == read_mcap(path) == args.frames
        chunks_cut, bytes_cut = plan_cut_mcap(cut)
        lay = read_layout(cut)
        assert not lay.has_summary and len(lay.chunks) == chunks_cut
        print(f"{args.frames} frames of {args.payload} B: {disk / 1e6:.1f} MB, {plan_ours(path)} chunks; "
              f"cut at 70 %: {chunks_cut} whole chunks", flush=True)

        def report(what, times, unit, scale, count=None):
            med = {k: statistics.median(v) for k, v in times.items()}
            results[what] = {k: {"median_s": med[k], "runs_s": v} for k, v in times.items()}
            parts = []
            for k, s in med.items():
                parts.append(f"{k} {s * scale:.2f} {unit}" if count is None else
                             f"{k} {count / s / 1e6:.2f} M rows/s ({s:.2f} s)")
            print(f"{what:>9}: " + "   ".join(parts), flush=True)

        report("plan", alternate({"a0py": lambda: plan_ours(path), "mcap": lambda: plan_mcap(path)},
                                 args.repeats * 4), "ms", 1e3)
        report("plan cut", alternate({"a0py": lambda: plan_ours(cut), "mcap": lambda: plan_cut_mcap(cut)},
                                     args.repeats), "ms", 1e3)
        results["plan cut"]["bytes_read"] = {"mcap": bytes_cut, "file": os.path.getsize(cut)}
        print(f"           (mcap's stream reader read {bytes_cut / 1e6:.1f} MB of the "
              f"{os.path.getsize(cut) / 1e6:.1f} MB file; a0py's scan reads the record headers)", flush=True)
        report("read", alternate({"a0py read_table": lambda: read_ours(path),
                                  "mcap iter_messages": lambda: read_mcap(path),
                                  "mcap in file order": lambda: read_mcap(path, False),
                                  "mcap + rows": lambda: read_mcap_rows(path)}, args.repeats),
               None, None, count=args.frames)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
