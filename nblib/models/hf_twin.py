"""The `transformers` model of the same configuration as an nblib model, with its weights copied
in: LlamaForCausalLM (the LCCP paper's Llama), GPT2LMHeadModel (the Gemma blog's Model A) or
Gemma3ForCausalLM (Model B). One mapping serves three users: the tests that compare logits,
the decode benchmark (benchmarks/bench_decode.py) and the Hugging Face export (nblib.export).

    check_hf_mappable(f, cfg) ValueError for a config transformers cannot represent (smeared keys)
    hf_config(model)          the transformers config (RoPE base as the model has it now, after
                              any ABF `set_rope_base`; YaRN as `rope_parameters` of type "yarn")
    hf_state_dict(model)      the weights under transformers' parameter names
    transformers_twin(model)  both together: the transformers model, eval mode
"""

from __future__ import annotations

HF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel", "gemma3": "Gemma3ForCausalLM"}
FAMILY_OF_CLASS = {"Llama": "llama", "GPT2": "gpt2", "Gemma3": "gemma3"}  # nblib model class -> family

LLAMA_NAMES = [("embed.", "model.embed_tokens."), ("blocks.", "model.layers."), ("attn_norm", "input_layernorm"),
               ("mlp_norm", "post_attention_layernorm"), ("attn.", "self_attn.")]
GEMMA3_NAMES = [("embed.", "model.embed_tokens."), ("blocks.", "model.layers."), ("attn.", "self_attn."),
                ("pre_attn_norm", "input_layernorm"), ("post_attn_norm", "post_attention_layernorm"),
                ("pre_mlp_norm", "pre_feedforward_layernorm"), ("post_mlp_norm", "post_feedforward_layernorm")]
GPT2_CONV1D = ("c_attn.weight", "c_proj.weight", "c_fc.weight")  # HF's Conv1D stores (in, out)
# Config fields whose non-default values transformers cannot represent, per family: field ->
# (the value transformers' model has, why). Smeared keys (Olsson et al. 2022) mix each key
# with the previous one through learned per-head scalars; LlamaForCausalLM has no such layer.
HF_UNSUPPORTED = {"llama": {"smear_keys": (False, "transformers' LlamaForCausalLM has no smeared-key layer")}}
# The token ids the twin has always used when none are given (tests and the decode benchmark).
TWIN_TOKEN_IDS = {"gemma3": {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}}


def family_of(model) -> str:
    """"llama", "gpt2" or "gemma3" for an nblib model; ValueError naming the allowed ones."""
    name = type(model).__name__
    if name not in FAMILY_OF_CLASS:
        raise ValueError(f"no transformers twin for {name}; allowed: {', '.join(FAMILY_OF_CLASS)}")
    return FAMILY_OF_CLASS[name]


def check_hf_mappable(family: str, config: dict) -> None:
    """Raise ValueError when a model config ({field: value}, as a run config's `model`) has a
    field transformers cannot represent, naming the field, its value and the allowed one."""
    for name, (allowed, why) in HF_UNSUPPORTED.get(family, {}).items():
        value = config.get(name, allowed)
        if value != allowed:
            raise ValueError(f"model.{name}={value!r} has no Hugging Face counterpart ({why}); "
                             f"allowed: {name}={allowed!r}")


def hf_rope(rotary) -> dict:
    """transformers `rope_parameters` of an nblib `layers.Rotary`: its current base and, with
    YaRN, the same frequencies and attention factor (transformers' `_compute_yarn_parameters`
    follows the YaRN paper's Eqs. 17-21 as `layers.yarn_inv_freq` does, mscale 0.1 ln s + 1);
    linear position interpolation as rope_type "linear" (frequencies divided by the factor)."""
    rp = {"rope_type": "default", "rope_theta": float(rotary.base)}
    rs = rotary.rope_scaling
    if rs is not None and rs["type"] == "linear":  # position interpolation: inv_freq / factor
        rp.update(rope_type="linear", factor=float(rs["factor"]))
    elif rs is not None:
        rp.update(rope_type="yarn", factor=float(rs["factor"]),
                  original_max_position_embeddings=int(rs["original_max_seq_len"]),
                  beta_fast=float(rs.get("beta_fast", 32)), beta_slow=float(rs.get("beta_slow", 1)))
    return rp


def hf_config(model, token_ids: dict | None = None, attn_implementation: str | None = None):
    """The transformers config of `model` (LlamaConfig, GPT2Config or Gemma3TextConfig).
    token_ids: {"bos_token_id", "eos_token_id", "pad_token_id"} (default: the twin's usual ones).
    max_position_embeddings is the model's nominal context `max_seq_len` (GPT-2: its position table)."""
    import transformers as tf  # optional: only the comparisons and the export need it

    family = family_of(model)
    c = model.config
    check_hf_mappable(family, vars(c))
    ids = dict(TWIN_TOKEN_IDS.get(family, {}) if token_ids is None else token_ids)
    if family == "gpt2":
        hc = tf.GPT2Config(vocab_size=c.vocab_size, n_positions=c.max_seq_len, n_embd=c.d_model, n_layer=c.n_layers,
                           n_head=c.n_heads, layer_norm_epsilon=c.norm_eps, activation_function="gelu_new", **ids)
    elif family == "llama":
        hc = tf.LlamaConfig(
            vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layers,
            num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads, head_dim=c.head_dim,
            max_position_embeddings=c.max_seq_len, rms_norm_eps=c.norm_eps, tie_word_embeddings=c.tie_embeddings,
            hidden_act="silu", attention_bias=False, mlp_bias=False, rope_parameters=hf_rope(model.rotary), **ids)
    else:
        hc = tf.Gemma3TextConfig(
            vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layers,
            num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads, head_dim=c.head_dim,
            query_pre_attn_scalar=c.head_dim, sliding_window=c.window, max_position_embeddings=c.max_seq_len,
            rms_norm_eps=c.norm_eps, tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh",
            layer_types=["full_attention" if w is None else "sliding_attention" for w in c.layer_windows],
            rope_parameters={"sliding_attention": hf_rope(model.rotary_local),
                             "full_attention": hf_rope(model.rotary_global)}, **ids)
    hc.architectures = [HF_ARCHITECTURES[family]]
    if attn_implementation is not None:
        hc._attn_implementation = attn_implementation
    return hc


def _renamed(key: str, names) -> str:
    for a, b in names:
        key = key.replace(a, b)
    return key


def hf_state_dict(model) -> dict:
    """`model`'s weights under transformers' names (tensors shared, GPT-2's Conv1D weights
    transposed). A tied output head appears as lm_head.weight = the token embedding."""
    family = family_of(model)
    sd = model.state_dict()
    if family == "gpt2":
        out = {"transformer." + k.replace("blocks.", "h."): v.t() if k.endswith(GPT2_CONV1D) else v
               for k, v in sd.items()}
        out["lm_head.weight"] = sd["wte.weight"]
        return out
    names = LLAMA_NAMES if family == "llama" else GEMMA3_NAMES
    out = {"model.norm.weight" if k == "norm.weight" else k if k == "lm_head.weight" else _renamed(k, names): v
           for k, v in sd.items()}
    if "lm_head.weight" not in out:  # tied (Gemma 3 always, Llama with tie_embeddings)
        out["lm_head.weight"] = sd["embed.weight"]
    return out


def transformers_twin(model, attn_implementation: str | None = None, token_ids: dict | None = None):
    """The transformers model of `model`'s configuration with `model`'s weights, in eval mode.
    Raises ValueError for another family, RuntimeError if the weights do not map one to one."""
    import transformers as tf

    family = family_of(model)
    hc = hf_config(model, token_ids, attn_implementation)
    cls = getattr(tf, HF_ARCHITECTURES[family])
    hf = cls(hc)
    sd = hf_state_dict(model)
    if family == "gpt2":  # older transformers keep causal-mask buffers (attn.bias, masked_bias) in the state dict
        missing, unexpected = hf.load_state_dict(sd, strict=False)
        if unexpected or not all(".attn.bias" in m or "masked_bias" in m for m in missing):
            raise RuntimeError(f"GPT-2 weights do not map onto transformers: {unexpected or missing}")
    else:
        try:
            hf.load_state_dict(sd, strict=True)
        except RuntimeError as e:
            raise RuntimeError(f"{family} weights do not map onto transformers: {e}") from None
    return hf.eval()
