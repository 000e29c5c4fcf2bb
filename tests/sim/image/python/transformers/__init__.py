"""Tiny `transformers` stand-in: only __version__ (from the image's release.json)."""
import simcommon as _sc

__version__ = _sc.release().get("transformers", "4.57.1")
