"""Where an output is wrong: a coarse map over rows and columns, so a mask or tiling bug shows.

A wrong last column block says "tail mask"; every other row wrong says "stride"; only row 0
right says "grid". The map is a small grid of cells, each the share of bad elements in one tile
of the output, plus the bad rows and columns written as ranges and the worst elements.
"""

from __future__ import annotations

import torch

MAX_CELLS = (16, 32)  # rows x columns of the map; tiles are powers of two so they read as block sizes


def as_matrix(tensor: torch.Tensor) -> torch.Tensor:
    """View any output as rows x columns: the last dimension is the row."""
    if tensor.dim() == 0:
        return tensor.reshape(1, 1)
    if tensor.dim() == 1:
        return tensor.reshape(1, -1)
    return tensor.reshape(-1, tensor.shape[-1])


def _tile(extent: int, cells: int) -> int:
    tile = 1
    while (extent + tile - 1) // tile > cells:
        tile *= 2
    return tile


def ranges(mask: torch.Tensor, limit: int = 6) -> str:
    """A 1-D boolean mask as index ranges: [T, T, T, F, F, F, F, T] -> '0-2, 7'.

    Found from where the mask switches on and off, so a long mask never becomes a Python list."""
    edge = torch.zeros(1, dtype=torch.int8, device=mask.device)
    steps = torch.diff(mask.to(torch.int8), prepend=edge, append=edge)
    starts = torch.nonzero(steps == 1).flatten()
    ends = torch.nonzero(steps == -1).flatten() - 1
    spans = zip(starts[:limit].tolist(), ends[:limit].tolist())
    text = [f"{a}-{b}" if a != b else f"{a}" for a, b in spans]
    more = f" and {len(starts) - limit} more ranges" if len(starts) > limit else ""
    return ", ".join(text) + more


def _wrong_to_the_end(mask: torch.Tensor) -> tuple[int, int] | None:
    """(first, block) where a row or column mask is wrong from `first` (not 0) to the end and
    right before it; `block` is the largest power of two that divides `first`."""
    bad = torch.nonzero(mask).flatten()
    if not 0 < bad.numel() < mask.numel():
        return None
    first = int(bad[0])
    if first == 0 or not bool(mask[first:].all()):
        return None
    return first, first & -first


def last_block(mask: torch.Tensor) -> tuple[int, int] | None:
    """(first, block) where the wrong stretch of a row or column mask runs from a multiple of a
    power of two to the end and is shorter than that power: the last block (its mask) is wrong."""
    found = _wrong_to_the_end(mask)
    return found if found and found[1] >= 8 and mask.numel() - found[0] < found[1] else None


def _block_hint(mask: torch.Tensor, axis: str) -> str | None:
    """What a band of bad rows or columns says about the block size, when it says anything: a
    wrong stretch from a multiple of a power of two to the end, shorter than that power, is the
    last block (its mask); everything wrong after the first block is a grid of one block."""
    extent = mask.numel()
    if found := last_block(mask):
        first, block = found
        return (f"{axis} {first}-{extent - 1} are wrong, and {first} = {first // block} x {block}: the last block "
                f"of {block} (or of a multiple of it) is wrong; look at its mask")
    found = _wrong_to_the_end(mask)
    if found and found[0] == found[1] and extent - found[0] >= found[1]:
        block = found[1]
        return f"only the first {block} {axis} are right: as if one block of {block} were computed; look at the grid"
    return None
    first = int(bad[0])
    block = first & -first
    if first == block and extent - first >= block:
        return f"only the first {block} {axis} are right: as if one block of {block} were computed; look at the grid"
    return None


def bad_map(bad: torch.Tensor) -> dict:
    """The share of bad elements per tile, with the tile size that the grid uses."""
    matrix = as_matrix(bad)
    rows, cols = matrix.shape
    tile_r, tile_c = _tile(rows, MAX_CELLS[0]), _tile(cols, MAX_CELLS[1])
    # One pass over the mask: sum each band of rows, then each band of columns of those sums.
    row_bands = torch.stack([matrix[r : r + tile_r].sum(dim=0) for r in range(0, rows, tile_r)])
    counts = torch.stack([row_bands[:, c : c + tile_c].sum(dim=1) for c in range(0, cols, tile_c)], dim=1)
    heights = [min(tile_r, rows - r) for r in range(0, rows, tile_r)]
    widths = [min(tile_c, cols - c) for c in range(0, cols, tile_c)]
    shares = [[n / (h * w) for n, w in zip(line, widths)] for line, h in zip(counts.tolist(), heights)]
    bad_rows, bad_cols = matrix.any(dim=1), matrix.any(dim=0)
    return {
        "rows": rows,
        "cols": cols,
        "tile": [tile_r, tile_c],
        "shares": [[round(s, 4) for s in row] for row in shares],
        "bad_rows": int(bad_rows.sum()),
        "bad_cols": int(bad_cols.sum()),
        "bad_row_ranges": ranges(bad_rows),
        "bad_col_ranges": ranges(bad_cols),
        "hints": [h for h in (_block_hint(bad_rows, "rows"), _block_hint(bad_cols, "columns")) if h],
    }


def describe(where: dict) -> str:
    rows, cols = where["rows"], where["cols"]
    text = f"bad rows: {where['bad_row_ranges']} ({where['bad_rows']} of {rows})"
    if rows == 1:
        text = "bad elements"
    text = f"{text}; bad columns: {where['bad_col_ranges']} ({where['bad_cols']} of {cols})"
    return "; ".join([text, *where.get("hints", [])])


def worst(out: torch.Tensor, ref: torch.Tensor, error: torch.Tensor, count: int = 5) -> list[dict]:
    """The elements with the largest error, with their index, expected and actual values."""
    flat = error.flatten().nan_to_num(nan=float("inf"))
    top = torch.topk(flat, min(count, flat.numel())).indices.tolist()
    shape = tuple(out.shape)
    result = []
    for i in top:
        index = []
        for d in reversed(shape):
            index.append(i % d)
            i //= d
        index = tuple(reversed(index))
        result.append({"index": list(index), "expected": float(ref[index]), "actual": float(out[index])})
    return result
