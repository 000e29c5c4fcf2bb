"""Importable `vllm` stand-in: version and model registry from the image's release.json."""
import simcommon as _sc

__version__ = _sc.release().get("version", "0.0.0")
__version_tuple__ = tuple(int(p) if p.isdigit() else p for p in __version__.split("."))


class _ModelRegistry:
    """Like vllm.ModelRegistry (a _ModelRegistry instance) - only the read side."""

    def get_supported_archs(self):
        return list(_sc.release().get("architectures", []))

    def is_supported(self, arch):
        return arch in self.get_supported_archs()

    @property
    def models(self):
        return {a: None for a in self.get_supported_archs()}


ModelRegistry = _ModelRegistry()

__all__ = ["__version__", "ModelRegistry"]
