# torch.__version__ / torch.version.cuda of the image (release.json "torch" / "cuda", through the shared
# GB10 model torch/_sim_gb10.py); the defaults are the real run's (tests/fixtures/nccl/machine.txt).
from torch import _sim_gb10

__version__ = _sim_gb10.torch_version()
cuda = _sim_gb10.cuda_version()
