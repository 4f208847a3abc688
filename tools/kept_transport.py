"""How fast a timing child's kept outputs reach the parent, on a GPU machine, each way they can go.

    python tools/kept_transport.py --gib 2.5 --json kept-transport.json

A child process puts a GPU tensor of that many bytes (one assignment's kept outputs, in pieces of
the size of softmax's) in front of the parent, each way in turn:
- `pipe`: the channel's signed frames (the harness's child/sending.py through pinned memory;
  frames.FrameReader into a file of the parent's);
- `file`: the kept outputs' memory file (messages/kept_file.py), its pages made by the parent ahead
  (as spawned.bind_kept does), its mapping pinned for the copy engine;
- `file-staged`: the same file, each piece through pinned memory of the child's own;
and the parent then loads each output onto its GPU, as judging does (and for the file, takes its
fingerprint). Printed and written as JSON: the child's seconds from its first byte to its last
(what a timed phase after it waits for), their parts, what the child made ready at its start (the
file's mapping), and the parent's load.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from grader.messages import frames, kept_file  # noqa: E402
from grader.child import sending  # noqa: E402
from grader.messages.job import Task  # noqa: E402
from grader.running.child_run import OutputFile  # noqa: E402

PIECE_BYTES = 1 << 28  # one kept output of softmax's benchmarks is about this size


def _sizes(total: int) -> list[int]:
    return [PIECE_BYTES] * (total // PIECE_BYTES) + ([total % PIECE_BYTES] if total % PIECE_BYTES else [])


def _outputs(total: int) -> list[torch.Tensor]:
    return [torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda") for size in _sizes(total)]


def child(way: str, total: int, fd: int, key: str, seed: int) -> None:
    outputs = _outputs(total)
    torch.cuda.synchronize()
    report: dict = {"way": way}
    if way != "pipe":  # made at the child's start, while the GPU is shared (child/main.py)
        putter = kept_file.Putter(fd, staged=way == "file-staged")
        began = time.perf_counter()
        putter.ready()
        report["ready_s"] = time.perf_counter() - began
    began = time.perf_counter()
    if way == "pipe":  # the harness's own sending, without a kept outputs' file
        sender = sending.Outputs(frames.FrameWriter(fd, bytes.fromhex(key)).send, SimpleNamespace(kept_seed=0))
        for index, flat in enumerate(outputs):
            sender.send_tensor(Task(f"t{index}", "kept", "bench", index, 0, max_output_bytes=flat.numel()), "kept", flat)
    else:
        fingerprinted = time.perf_counter()
        report["fingerprints"] = [kept_file.fingerprint(flat, seed) for flat in outputs]
        report["fingerprint_s"] = time.perf_counter() - fingerprinted
        report["offsets"] = putter.put_all(outputs)
        report["registered"], report["parts_s"] = putter.registered, putter.timings
    report["send_s"] = time.perf_counter() - began
    report["threads"] = torch.get_num_threads()
    print(json.dumps(report), flush=True)


def _spawn(way: str, total: int, fd: int, key: str, seed: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", way, "--bytes", str(total), "--fd", str(fd),
                             "--key", key, "--seed", str(seed)], pass_fds=(fd,), stdout=subprocess.PIPE, text=True)  # fmt: skip


def through_pipe(total: int) -> dict:
    key, folder = secrets.token_hex(32), Path(tempfile.mkdtemp())
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 1 << 20)
    process = _spawn("pipe", total, write_end, key, 0)
    os.close(write_end)
    reader = frames.FrameReader(os.fdopen(read_end, "rb"), bytes.fromhex(key), folder, total + 1, total + 1)
    got: list = []
    reading = threading.Thread(target=lambda: _read_all(reader, got))
    reading.start()
    report = json.loads(process.stdout.read())
    process.wait()
    reading.join()
    began = time.perf_counter()
    for frame in got:
        OutputFile("uint8", [frame.payload_bytes], frame.payload).read().to("cuda")
    torch.cuda.synchronize()
    report["load_s"] = time.perf_counter() - began
    for frame in got:
        frame.payload.unlink()
    return report


def _read_all(reader: frames.FrameReader, got: list) -> None:
    try:
        while True:
            got.append(reader.read())
    except EOFError:
        pass


def through_file(total: int, way: str) -> dict:
    file, seed = kept_file.KeptFile(), secrets.randbits(62)
    began = time.perf_counter()
    file.bound(total, ahead=total)  # as spawned.bind_kept does, long before the child sends
    while os.fstat(file.fd).st_blocks * 512 < total and time.perf_counter() - began < 60:
        time.sleep(0.01)
    made_s = time.perf_counter() - began
    process = _spawn(way, total, file.fd, "", seed)
    report = json.loads(process.stdout.read())
    process.wait()
    report["pages_made_ahead_s"] = made_s
    began = time.perf_counter()
    loaded = [file.bytes_at(offset, size).to("cuda") for offset, size in zip(report["offsets"], _sizes(total))]
    torch.cuda.synchronize()
    report["load_s"] = time.perf_counter() - began
    began = time.perf_counter()
    report["fingerprints_match"] = [kept_file.fingerprint(t, seed) for t in loaded] == report["fingerprints"]
    report["parent_fingerprint_s"] = time.perf_counter() - began
    del report["fingerprints"], report["offsets"]
    file.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=2.5)
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.bytes, args.fd, args.key, args.seed)
        return
    total = int(args.gib * (1 << 30))
    torch.zeros(1, device="cuda")
    results = []
    for way in ("pipe", "file", "file-staged", "pipe", "file", "file-staged"):
        report = through_pipe(total) if way == "pipe" else through_file(total, way)
        report["gb"] = total / 1e9
        print(json.dumps(report), flush=True)
        results.append(report)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                               "results": results}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
