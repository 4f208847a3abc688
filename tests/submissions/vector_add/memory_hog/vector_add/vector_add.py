# Hostile: fills host memory, 256 MiB at a time, until something stops it.
import torch


def add(x, y):
    hoard = []
    while True:
        hoard.append(torch.ones(64 * 2**20, dtype=torch.float32))  # written, so resident
