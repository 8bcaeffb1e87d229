"""The three decoder families and a small registry.

    model = build_model("llama", {"vocab_size": 256, "d_model": 64, ...})
    cfg_dict = config_to_dict(model.config)   # JSON-ready; build_model(family, cfg_dict) rebuilds it

Families: "llama" (the paper's model, the LCCP paper §3.1), "gpt2" (the Gemma blog's Model A),
"gemma3" (the Gemma blog's Model B). Imports no other nblib package: every layer above builds on it.
"""

import copy
import dataclasses

from .gemma3 import Gemma3, Gemma3Config
from .gpt2 import GPT2, GPT2Config
from .llama import Llama, LlamaConfig

FAMILIES = {
    "llama": (LlamaConfig, Llama),
    "gpt2": (GPT2Config, GPT2),
    "gemma3": (Gemma3Config, Gemma3),
}


def build_model(family: str, config: dict):
    """Build an untrained model of `family` from a plain config dict (keys = config fields)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; allowed: {sorted(FAMILIES)}")
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    cfg_cls, model_cls = FAMILIES[family]
    fields = {f.name for f in dataclasses.fields(cfg_cls)}
    unknown = set(config) - fields
    if unknown:
        raise ValueError(f"unknown {family} config keys {sorted(unknown)}; allowed: {sorted(fields)}")
    missing = {f.name for f in dataclasses.fields(cfg_cls)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING} - set(config)
    if missing:
        raise ValueError(f"missing {family} config keys {sorted(missing)}")
    return model_cls(cfg_cls(**copy.deepcopy(config)))


def config_to_dict(cfg) -> dict:
    """A config dataclass as a plain dict (deep copy), the inverse of build_model's input."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"expected a model config dataclass instance, got {type(cfg).__name__}")
    return dataclasses.asdict(cfg)


__all__ = ["FAMILIES", "build_model", "config_to_dict", "Llama", "LlamaConfig", "GPT2", "GPT2Config",
           "Gemma3", "Gemma3Config"]
