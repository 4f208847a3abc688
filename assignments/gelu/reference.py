"""Grading data for the gelu assignment that is code rather than numbers.

The grader imports this module and calls the functions that assignment.toml names for each part:
the input generator, the float64 reference, the torch baseline the student is timed against,
the fewest bytes and the FLOPs that place a timing on the roofline, and, for the CUDA part, the
launcher's argument list and the output's shape. Nothing here is shipped as a solution: it only
describes the problem.

Each of these functions is a top-level `def`, named in assignment.toml or, where a part names
none, called `<part>_inputs`, `<part>_reference`, `<part>_baseline` or `<part>_traffic` (a CUDA C
part's also `<part>_arguments`, `<part>_output_shape`); loading assignment.toml checks each exists.
"""

import ctypes
import math

import torch

# The tanh approximation's constants: sqrt(2 / pi) and the cubic coefficient.
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CUBIC = 0.044715
# The value planted at each end of every input: GELU's two tails, gelu(12) = 12 and
# gelu(-12) = -1.6e-61 (a float32 kernel must give ~0 there, not NaN and not -12).
TAIL = 12.0

# FLOPs per element of the tanh formula, counting tanh as one: x*x*x (2), * 0.044715, + x,
# * sqrt(2/pi), tanh, 1 + t, 0.5 * x, the final product.
GELU_FLOPS = 9


def _activations(shape, generator, device):
    """``0.5 + 1.5 * randn``, one element in 32 replaced by ``8 * randn`` (up to about +-30).

    The mean of 0.5 keeps the outputs from averaging out; most values fall in [-3, 4], where the
    tanh and erf forms of GELU differ most (by up to 5e-4, and by 10% of the value near -3);
    the large ones reach both tails, where exp overflows in a careless tanh. The first element
    is always +TAIL and the last -TAIL, so even a small case holds both tails.
    """
    values = 0.5 + 1.5 * torch.randn(shape, generator=generator, device=device)
    large = torch.rand(shape, generator=generator, device=device) < 1.0 / 32.0
    x = torch.where(large, 8.0 * torch.randn(shape, generator=generator, device=device), values)
    flat = x.view(-1)
    flat[-1] = -TAIL
    flat[0] = TAIL
    return x


def gelu_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``gelu(x)`` (and for ``gelu_cuda``): one contiguous tensor of any shape."""
    if layout != "contiguous":
        raise ValueError(f"gelu has only the contiguous layout, not {layout!r}")
    return {"x": _activations(shape, generator, device).to(dtype)}


def gelu_reference(x):
    """GELU, tanh approximation; the grader passes ``x`` upcast to float64."""
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + CUBIC * x * x * x)))


def gelu_baseline(x):
    """What the student's kernel is timed against: torch's own fused GELU, in the input's dtype."""
    return torch.nn.functional.gelu(x, approximate="tanh")


def gelu_chain(x):
    """GELU written as torch ops, in the input's dtype: nine kernels when run as they stand
    (six multiplications, two additions and a tanh). The report shows the student's time against
    torch.compile of this chain, which fuses it into one generated Triton kernel (not graded)."""
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + CUBIC * x * x * x)))


def gelu_traffic(x):
    """Fewest bytes through memory: one read of x, one write of the output."""
    n = x.numel()
    return {"bytes": 2 * n * x.element_size(), "flops": GELU_FLOPS * n}


def bias_gelu_scale_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``bias_gelu_scale(x, bias, scale)``.

    ``x`` as for gelu; ``bias`` of shape ``(x.shape[-1],)`` and x's dtype, ``0.5 + randn``;
    ``scale`` a 0-dimensional float32 tensor on the same device, between 0.5 and 1.5.
    """
    x = gelu_inputs(shape, dtype, layout, generator, device)["x"]
    bias = (0.5 + torch.randn(shape[-1], generator=generator, device=device)).to(dtype)
    scale = 0.5 + torch.rand((), generator=generator, device=device)
    return {"x": x, "bias": bias, "scale": scale}


def bias_gelu_scale_reference(x, bias, scale):
    """``(gelu(x) + bias) * scale``, in float64 like its inputs."""
    return (gelu_reference(x) + bias) * scale


def bias_gelu_scale_baseline(x, bias, scale):
    """The unfused chain the fused kernel is timed against: GELU written as torch ops (nine
    kernels: six multiplications, two additions and a tanh), then the bias and the scale (two
    more). Each kernel reads its operands from memory and writes its result back. The report
    also shows the student's time against torch.compile of this same chain (not graded)."""
    return (gelu_chain(x) + bias) * scale


def bias_gelu_scale_traffic(x, bias, scale):
    """Fewest bytes: one read of x, one write of the output, one read of bias and of scale.

    FLOPs: GELU's, then the addition and the multiplication.
    """
    n = x.numel()
    nbytes = 2 * n * x.element_size() + bias.numel() * bias.element_size() + scale.element_size()
    return {"bytes": nbytes, "flops": (GELU_FLOPS + 2) * n}


def gelu_output_shape(x):
    """Shape of the output that the grader allocates for the CUDA launcher."""
    return tuple(x.shape)


def gelu_cuda_arguments(out, x):
    """The launcher's arguments in order: ``(x, y, n)``; pointers as device pointers, n as a long long."""
    return [x, out, ctypes.c_longlong(x.numel())]
