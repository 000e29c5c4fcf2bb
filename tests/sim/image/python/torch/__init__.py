"""Stand-in `torch` for the simulated Sparks: only what the fabric check
(components/hostProgram/spark_vllm/fabric.py), the compat check's first kernel (spark_vllm/cuda.py) and its run of vLLM's
own kernels (spark_vllm/kernels.py: FP8/uint8 dtypes, Tensor.to, Tensor.t) use: tensors that are a size and one value each, torch.cuda (one GB10) and torch.distributed's
NCCL path (torch/distributed/__init__.py).
Versions, memory and CUDA facts: the GB10 model shared with the vLLM stand-in (torch/_sim_gb10.py)."""
import builtins

from torch import _sim_gb10, version
from torch.version import __version__


class dtype:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32", 4)
float16 = dtype("float16", 2)
bfloat16 = dtype("bfloat16", 2)
float8_e4m3fn = dtype("float8_e4m3fn", 1)
uint8 = dtype("uint8", 1)
float = float32
AcceleratorError = _sim_gb10.AcceleratorError


class Tensor:
    """A tensor whose elements all hold one value: enough for all-reduce sums and their checks."""

    def __init__(self, numel, value, dtype=float32, device="cpu"):
        self._numel, self._value, self.dtype, self.device = int(numel), value, dtype, str(device)

    def numel(self):
        return self._numel

    def element_size(self):
        return self.dtype.itemsize

    def __len__(self):
        return self._numel

    def fill_(self, value):
        self._value = value
        return self

    def add_(self, other):
        self._value += other.item() if isinstance(other, Tensor) else other
        return self

    def mul_(self, other):
        self._value *= other.item() if isinstance(other, Tensor) else other
        return self

    def __getitem__(self, index):
        if isinstance(index, int):
            if not -self._numel <= index < self._numel:
                raise IndexError("index %d is out of bounds for dimension 0 with size %d" % (index, self._numel))
            return Tensor(1, self._value, self.dtype, self.device)
        return Tensor(len(range(*index.indices(self._numel))), self._value, self.dtype, self.device)

    def item(self):
        return self._value

    def to(self, dtype):
        return Tensor(self._numel, self._value, dtype, self.device)

    def t(self):
        return self

    def __float__(self):
        return builtins.float(self._value)

    def __repr__(self):
        return "tensor(<%d x %r>, device='%s')" % (self._numel, self._value, self.device)


def _numel(size):
    n = 1
    for s in size:
        n *= int(s) if not isinstance(s, (tuple, list)) else _numel(s)
    return n


def full(size, value, dtype=float32, device="cpu"):
    if str(device).startswith("cuda"):
        _sim_gb10.check_kernels()  # filling it is the first kernel: an image without GB10 kernels fails here
    return Tensor(_numel(size if isinstance(size, (tuple, list)) else (size,)), value, dtype, device)


def ones(*size, dtype=float32, device="cpu"):
    return full(size, 1.0, dtype, device)


def zeros(*size, dtype=float32, device="cpu"):
    return full(size, 0.0, dtype, device)


def empty(*size, dtype=float32, device="cpu"):
    return full(size, 0.0, dtype, device)


from torch import cuda, distributed  # noqa: E402 - they import the names above

__all__ = ["__version__", "version", "cuda", "distributed", "dtype", "float32", "float16", "bfloat16", "float8_e4m3fn", "uint8", "float",
           "AcceleratorError",
           "Tensor", "full", "ones", "zeros", "empty"]
