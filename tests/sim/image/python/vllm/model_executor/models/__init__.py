from vllm import ModelRegistry  # noqa: F401
