"""CONFIG_MAPPING_NAMES: model_type -> config class name, from release.json "model_types"."""
from collections import OrderedDict

import simcommon as _sc


def _class_name(model_type):
    return "".join(p[:1].upper() + p[1:] for p in model_type.split("_")) + "Config"


CONFIG_MAPPING_NAMES = OrderedDict(
    (t, _class_name(t)) for t in _sc.release().get("model_types", _sc.DEFAULT_MODEL_TYPES))
