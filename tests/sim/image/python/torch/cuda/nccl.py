"""torch.cuda.nccl stand-in: the NCCL version torch reports (the real run's, tests/fixtures/nccl/machine.txt)."""


def version():
    return (2, 28, 9)
