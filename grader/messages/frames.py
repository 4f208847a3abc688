"""The signed frames that carry the child's messages to the parent (`FrameWriter`, `FrameReader`).
Each frame is

    4 bytes: header length | 8 bytes: payload length | header (JSON) | payload | 32 bytes: HMAC-SHA256

where the HMAC covers a sequence number, both lengths, the header and the payload (the SHA-256 of
each 4 MB of it in turn, which both ends hash on several threads at once), under a key that only
the parent and the child's harness know (it arrives inside the Job). Student code shares the
child's process, so it can find the pipe; a frame it writes without the key fails the check and
the parent calls that `tampering`. The payload carries an output tensor's bytes, streamed straight
into a file the parent owns, never a path the child names. What the signature proves, and what it
does not, is in this package's docstring (grader/messages/__init__.py).
"""

from __future__ import annotations

import _thread
import hmac
import dataclasses
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from _hashlib import hmac_new as _hmac_new
from _hashlib import openssl_sha256 as _sha256
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any, BinaryIO, Iterable

from grader.messages.decoding import DATACLASSES, ProtocolError, decode
from grader.messages.reports import MESSAGES, OUTCOMES

PREFIX = struct.Struct(">IQ")  # header length, payload length
MAC_BYTES = 32
MAX_HEADER_BYTES = 1 << 20
PAYLOAD_CHUNK = 1 << 22  # a payload's unit of hashing (its SHA-256 goes into the frame's HMAC), and the parent's reads
SENT_CHUNK = 1 << 24  # the child's pieces of a payload
DIGEST_THREADS = 4  # the parent's threads hashing a payload's units
READ_AHEAD = 8  # units the parent reads before the oldest is hashed and written


def _mac(key: bytes, seq: int, header: bytes, payload_length: int):
    mac = _hmac_new(key, digestmod="sha256")
    mac.update(seq.to_bytes(8, "big") + PREFIX.pack(len(header), payload_length) + header)
    return mac


def _unencodable(value: object) -> None:
    raise TypeError(f"a message holds a {type(value).__name__}, which the channel does not carry")


class FrameWriter:
    """The child's end: signs and writes each message, with an optional payload of raw bytes.

    It runs after student code did, in the same process, and student code can rebind any module's
    names: json's default encoder (to rewrite a message before it is signed), hmac's OpenSSL
    binding (to be handed the key at the next frame), dataclasses.fields. So what it relies on was
    taken when it was made, before any student code ran, and is not looked up by name again: the
    key lives only inside OpenSSL's HMAC state (each frame signs with a copy of it), the JSON
    encoder is json's C one, and the messages' names and fields, and the thread functions that sign
    a payload while it is written, are its own copies. (What it cannot stop is in this module's
    docstring.)"""

    def __init__(self, fd: int, key: bytes):
        self.fd, self.seq = fd, 0
        self._signer = _hmac_new(key, digestmod="sha256")
        self._encode = c_make_encoder(None, _unencodable, encode_basestring_ascii, None, ": ", ", ", False, False, True)
        self._names = {cls: name for name, cls in {**MESSAGES, **OUTCOMES}.items()}
        self._tagged = frozenset(OUTCOMES.values())
        self._fields = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in DATACLASSES}
        self._threads = (_thread.start_new_thread, _thread.allocate_lock, _update_and_release)
        self._sha256 = _sha256

    def send(self, message: Any, payload: memoryview | bytes | Iterable = b"", length: int | None = None) -> None:
        """Sign and write one frame. `payload`: bytes, or pieces of bytes adding up to `length`,
        each asked for once the one before is signed and written (a producer may reuse its buffer)."""
        if length is None:
            view = memoryview(payload).cast("B")
            payload, length = (view[start : start + SENT_CHUNK] for start in range(0, len(view), SENT_CHUNK)), len(view)
        header = "".join(self._encode({"type": self._names[type(message)], "body": self._plain(message)}, 0)).encode()
        mac = self._signer.copy()
        mac.update(self.seq.to_bytes(8, "big") + PREFIX.pack(len(header), length) + header)
        self._write(PREFIX.pack(len(header), length) + header)
        left, units = length, []  # each unit's SHA-256, in order; the last may still be filling
        for piece in payload:
            piece = memoryview(piece).cast("B")
            if len(piece) > left:
                raise ValueError("a payload longer than its frame says")
            self._hash_and_write(units, length - left, piece)
            left -= len(piece)
        if left:
            raise ValueError("a payload shorter than its frame says")
        mac.update(b"".join(unit.digest() for unit in units))
        self._write(mac.digest())
        self.seq += 1

    def _hash_and_write(self, units: list, offset: int, piece: memoryview) -> None:
        """Hash a piece that starts `offset` bytes into the payload, each of its units (PAYLOAD_CHUNK
        bytes of the payload) on a thread of the writer's own, while writing it: each waits on
        OpenSSL or the kernel, not on Python. One HMAC over the whole payload, signed on one
        thread while written, had let a vector addition's 470 MB of kept outputs leave its child in
        0.38 s on an H200 alone and 0.63 s beside seven other gradings, bound by the hashing, while
        the next timed phase waited. Where no thread can start (a process limit that the student's
        threads used up), one after the other. A GPU timing child's kept outputs, gigabytes, cross in
        the kept outputs' file instead (kept_file.py: 2.7 GB in 0.12-0.16 s where the pipe took 1.6 s)."""
        start_thread, new_lock, update = self._threads
        jobs, at = [], 0
        while at < len(piece):
            filled = (offset + at) % PAYLOAD_CHUNK
            if not filled:
                units.append(self._sha256())
            take = min(PAYLOAD_CHUNK - filled, len(piece) - at)
            jobs.append((units[-1], piece[at : at + take]))
            at += take
        hashed = []
        for unit, part in jobs:  # each unit has one part of this piece: no two threads share a hash
            done = new_lock()
            done.acquire()
            try:
                start_thread(update, (unit, part, done))
            except RuntimeError:
                unit.update(part)
                done.release()
            hashed.append(done)
        self._write(piece)
        for done in hashed:
            done.acquire()  # hashed too: the piece's buffer may be reused

    def _plain(self, value: Any) -> Any:
        """A message as JSON-ready data; a union member carries its class name under "type"."""
        kind = type(value)
        fields = self._fields.get(kind)
        if fields is not None:  # a message's own dataclass: its fields, read from the instance itself
            state = object.__getattribute__(value, "__dict__")
            data = {name: self._plain(state[name]) for name in fields}
            return {"type": self._names[kind], **data} if kind in self._tagged else data
        if kind is list or kind is tuple:
            return [self._plain(v) for v in value]
        if kind is dict:
            return {str(k): self._plain(v) for k, v in dict.items(value)}
        return value

    def _write(self, data: memoryview | bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


@dataclass
class Frame:
    message: Any
    payload: Path | None = None  # where the parent wrote the payload's bytes
    payload_bytes: int = 0


class FrameReader:
    """The parent's end: reads, checks and decodes frames, writing payloads into `folder`.

    `payload_cap` bounds one payload and `budget` all of them together, so a child cannot make the
    parent fill its disk; every violation is a ProtocolError and ends the reading.
    """

    def __init__(self, stream: BinaryIO, key: bytes, folder: Path, payload_cap: int, budget: int):
        self.stream, self.key, self.folder = stream, key, folder
        self.payload_cap, self.budget, self.seq = payload_cap, budget, 0

    def _exactly(self, count: int) -> bytes:
        data = self.stream.read(count)
        if len(data) != count:
            raise EOFError
        return data

    def read(self) -> Frame:
        """The next frame; EOFError at a clean end of the stream."""
        prefix = self.stream.read(PREFIX.size)
        if not prefix:
            raise EOFError
        if len(prefix) != PREFIX.size:
            raise ProtocolError("crash", "the result channel ended in the middle of a message")
        header_length, payload_length = PREFIX.unpack(prefix)
        if header_length > MAX_HEADER_BYTES:
            raise ProtocolError("tampering", f"a message header of {header_length} bytes (at most {MAX_HEADER_BYTES})")
        if payload_length > min(self.payload_cap, self.budget):
            raise ProtocolError("tampering", f"a payload of {payload_length} bytes, more than the output can hold")
        try:
            header = self._exactly(header_length)
            mac = _mac(self.key, self.seq, header, payload_length)
            path = self._payload(payload_length, mac) if payload_length else None
            signature = self._exactly(MAC_BYTES)
        except EOFError:
            raise ProtocolError("crash", "the result channel ended in the middle of a message") from None
        if not hmac.compare_digest(signature, mac.digest()):
            raise ProtocolError("tampering", "a message on the result channel was not signed by the grader's harness: "
                                "something else in the process wrote to it")  # fmt: skip
        self.seq += 1
        self.budget -= payload_length
        return Frame(decode(header), path, payload_length)

    def _payload(self, length: int, mac) -> Path:
        """The payload's bytes, into a new file of the parent's. Reading the next units, hashing
        each on one of several threads and writing them in order go on at once (each waits on the
        kernel or OpenSSL, not on Python): one after another, 2.5 GB of kept outputs cost a timed
        phase 8 s on an H100 machine, while no other grading could time."""
        path = self.folder / f"payload-{self.seq}.bin"
        # O_EXCL: the parent's own new file, never one that something else placed there.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with (
            os.fdopen(fd, "wb", buffering=0) as file,
            ThreadPoolExecutor(DIGEST_THREADS, "digest") as hashers,
            ThreadPoolExecutor(1, "payload") as writer,
        ):
            digests: list = []
            written: list = []
            left = length
            while left:
                if len(written) >= READ_AHEAD:
                    written[-READ_AHEAD].result()  # memory for at most READ_AHEAD units in flight
                    digests[-READ_AHEAD].result()
                unit = memoryview(bytearray(min(left, PAYLOAD_CHUNK)))
                self._fill(unit)
                digests.append(hashers.submit(_digest, unit))
                written.append(writer.submit(_write_all, file, unit))
                left -= len(unit)
            for done in written:
                done.result()
            mac.update(b"".join(done.result() for done in digests))
        return path

    def _fill(self, chunk: memoryview) -> None:
        got = 0
        while got < len(chunk):
            read = self.stream.readinto(chunk[got:])
            if not read:
                raise EOFError
            got += read


def _update_and_release(unit, part: memoryview, done) -> None:
    try:
        unit.update(part)
    finally:
        done.release()


def _digest(unit: memoryview) -> bytes:
    return _sha256(unit).digest()


def _write_all(file, data: memoryview) -> None:
    while data:
        data = data[file.write(data) :]
