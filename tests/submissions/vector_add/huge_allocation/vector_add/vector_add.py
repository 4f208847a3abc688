# Hostile: the call asks for four terabytes.
import torch


def add(x, y):
    return torch.empty(10**12, dtype=torch.float32, device=x.device)
