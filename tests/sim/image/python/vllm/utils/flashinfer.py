"""Stand-in for vllm.utils.flashinfer.has_flashinfer(): whether the image has FlashInfer (release.json "flashinfer",
default false: the stand-in image has none)."""
import simcommon as _sc


def has_flashinfer():
    return bool(_sc.release().get("flashinfer"))
