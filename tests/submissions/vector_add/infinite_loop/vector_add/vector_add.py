# Hostile: the call never returns. Must cost a timeout, and only this assignment.
def add(x, y):
    while True:
        pass
