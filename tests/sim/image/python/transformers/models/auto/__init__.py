from .configuration_auto import CONFIG_MAPPING_NAMES  # noqa: F401
