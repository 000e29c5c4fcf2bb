# As the real run in tests/fixtures/nccl/machine.txt printed them.
__version__ = "2.11.0+cu130"
cuda = "13.0"
