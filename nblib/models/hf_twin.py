"""The `transformers` model of the same configuration as an nblib GPT-2 (Model A) or Gemma
3-style (Model B) model, with its weights copied in: GPT2LMHeadModel or Gemma3ForCausalLM.
The twin is the independent implementation the tests compare logits against and the decode
benchmark (benchmarks/bench_decode.py) compares speed against.
"""

from __future__ import annotations

GEMMA3_NAMES = [("embed.", "model.embed_tokens."), ("blocks.", "model.layers."), ("attn.", "self_attn."),
                ("pre_attn_norm", "input_layernorm"), ("post_attn_norm", "post_attention_layernorm"),
                ("pre_mlp_norm", "pre_feedforward_layernorm"), ("post_mlp_norm", "post_feedforward_layernorm")]
GPT2_CONV1D = ("c_attn.weight", "c_proj.weight", "c_fc.weight")  # HF's Conv1D stores (in, out)


def transformers_twin(model, attn_implementation: str | None = None):
    """The transformers model of `model`'s configuration with `model`'s weights, in eval mode.
    Raises ValueError for another family, RuntimeError if the weights do not map one to one."""
    import transformers as tf  # optional: only the comparisons need it

    family = type(model).__name__
    c = model.config
    kw = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    if family == "GPT2":
        hf = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=c.vocab_size, n_positions=c.max_seq_len, n_embd=c.d_model,
                                              n_layer=c.n_layers, n_head=c.n_heads, layer_norm_epsilon=c.norm_eps,
                                              **kw))
        sd = {"transformer." + k.replace("blocks.", "h."): v.t() if k.endswith(GPT2_CONV1D) else v
              for k, v in model.state_dict().items()}
        sd["lm_head.weight"] = model.wte.weight
        missing, unexpected = hf.load_state_dict(sd, strict=False)
        if unexpected or not all(".attn.bias" in m or "masked_bias" in m for m in missing):
            raise RuntimeError(f"GPT-2 weights do not map onto transformers: {unexpected or missing}")
        return hf.eval()
    if family == "Gemma3":
        hc = tf.Gemma3TextConfig(
            vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layers,
            num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads, head_dim=c.head_dim,
            query_pre_attn_scalar=c.head_dim, sliding_window=c.window, max_position_embeddings=8192,
            rms_norm_eps=c.norm_eps, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            layer_types=["full_attention" if w is None else "sliding_attention" for w in c.layer_windows],
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": c.rope_local_base},
                             "full_attention": {"rope_type": "default", "rope_theta": c.rope_global_base}})
        if attn_implementation is not None:
            hc._attn_implementation = attn_implementation
        hf = tf.Gemma3ForCausalLM(hc)
        sd = {}
        for k, v in model.state_dict().items():
            hk = k
            for a, b in GEMMA3_NAMES:
                hk = hk.replace(a, b)
            sd["model.norm.weight" if k == "norm.weight" else hk] = v
        sd["lm_head.weight"] = model.embed.weight
        hf.load_state_dict(sd, strict=True)
        return hf.eval()
    raise ValueError(f"no transformers twin for {family}; allowed: GPT2, Gemma3")
