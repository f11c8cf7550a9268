#!/usr/bin/env python3
"""Builds tiny random-initialised transformers checkpoints of the llama family and their goldens.

kvlm's model parity tests (tests/model/) load each checkpoint and compare against these goldens,
which come from Hugging Face transformers only (DESIGN.md §1.2: oracle parity).

Run where torch and transformers are installed (the accelerator machine; CPU is enough):
    python3 tools/model_fixtures.py --out /tmp/fixtures
and unpack the result into tests/data/models/.

Every fixture directory holds what save_pretrained writes (config.json, generation_config.json,
model.safetensors) plus:
    golden.json          prompt, teacher-forced decode tokens, greedy tokens, versions
    golden_prefill.f32   logits of every prompt position, [len(prompt), vocab] little-endian f32
    golden_decode.f32    logits of the teacher-forced decode steps, [len(decode_tokens), vocab]

Goldens are computed in float32 with eager attention. Fixtures stored in bf16 have their weights
rounded to bf16 before the goldens are computed, so the goldens are exact for the stored weights.
"""
import argparse
import copy
import json
import math
import os
import struct
import sys
import traceback

import torch
import transformers

VOCAB = 256
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 128
PROMPT_LEN = 12
DECODE_STEPS = 16
GREEDY_STEPS = 16

BASE = dict(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    num_key_value_heads=KV_HEADS,
    intermediate_size=INTERMEDIATE,
    max_position_embeddings=128,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
)

# name -> (config class, model class, config overrides, rope parameters, storage dtype, extras)
# Rope parameters are given once and spelled for whichever transformers version runs the script.
FIXTURES = [
    ("llama_tied", "Llama", dict(tie_word_embeddings=True), dict(rope_type="default", rope_theta=10000.0), "f32", {}),
    ("llama_untied_bias", "Llama", dict(tie_word_embeddings=False, attention_bias=True, mlp_bias=True),
     dict(rope_type="default", rope_theta=10000.0), "f32", {}),
    ("llama3_rope", "Llama", dict(tie_word_embeddings=False),
     dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
          original_max_position_embeddings=32), "bf16", {}),
    # factor == max_position_embeddings / original so that every transformers version's reading of
    # original_max_position_embeddings gives the same frequencies.
    ("yarn_rope", "Llama", dict(tie_word_embeddings=True),
     dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=32), "bf16", {}),
    # max_position_embeddings 16 < prompt + decode, so the dynamic rescaling happens while decoding.
    ("dynamic_rope", "Llama", dict(tie_word_embeddings=True, max_position_embeddings=16),
     dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0), "bf16", {}),
    ("linear_rope_mistral_swa", "Mistral", dict(tie_word_embeddings=False, sliding_window=8),
     dict(rope_type="linear", rope_theta=10000.0, factor=2.0), "bf16", {}),
    ("qwen2_tied", "Qwen2", dict(tie_word_embeddings=True), dict(rope_type="default", rope_theta=1000000.0), "f32", {}),
    ("qwen2_untied", "Qwen2", dict(tie_word_embeddings=False), dict(rope_type="default", rope_theta=1000000.0),
     "bf16", {}),
    ("qwen3_tied", "Qwen3", dict(tie_word_embeddings=True, head_dim=32), dict(rope_type="default", rope_theta=1000000.0),
     "f32", {}),
    ("qwen3_untied", "Qwen3", dict(tie_word_embeddings=False, head_dim=16),
     dict(rope_type="default", rope_theta=1000000.0), "bf16", {}),
    # MiniCPM-style scaling on a llama; transformers' llama ignores these fields, so forward hooks
    # apply MiniCPM's formulas (embeddings * scale_emb, each residual branch * scale_depth /
    # sqrt(layers), final hidden / (hidden / dim_model_base)).
    ("minicpm_llama", "Llama", dict(tie_word_embeddings=False), dict(rope_type="default", rope_theta=10000.0), "bf16",
     {"minicpm": dict(scale_emb=12.0, scale_depth=1.4, dim_model_base=16)}),
]


def uses_rope_parameters(config_cls):
    """transformers v5 spells RoPE as config.rope_parameters; v4 as rope_theta + rope_scaling."""
    return hasattr(config_cls(), "rope_parameters")


def make_config(family, overrides, rope):
    config_cls = getattr(transformers, family + "Config")
    kwargs = dict(BASE)
    kwargs.update(overrides)
    if uses_rope_parameters(config_cls):
        kwargs["rope_parameters"] = dict(rope)
    else:
        rope = dict(rope)
        kwargs["rope_theta"] = rope.pop("rope_theta")
        if rope["rope_type"] != "default":
            kwargs["rope_scaling"] = rope
    config = config_cls(**kwargs)
    return config


def build_model(family, config):
    model_cls = getattr(transformers, family + "ForCausalLM")
    model = model_cls(config).to(torch.float32)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:
        model.config._attn_implementation = "eager"
    model.eval()
    return model


def randomise(model, seed):
    """Replaces transformers' init (tiny std, unit norms, zero biases) with values that exercise every
    parameter: norms around 1, non-zero biases, unit-variance activations."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if "norm" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.2 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.2 * noise)
            elif "embed_tokens" in name:
                p.copy_(noise)
            elif name.startswith("lm_head"):
                p.copy_(noise * (2.0 / math.sqrt(p.shape[1])))
            else:
                p.copy_(noise / math.sqrt(p.shape[1]))


def round_to_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def add_minicpm_hooks(model, config):
    scale_emb = config.scale_emb
    residual = config.scale_depth / math.sqrt(config.num_hidden_layers)
    divisor = config.hidden_size / config.dim_model_base

    def scale_output(factor):
        def hook(module, args, output):
            if isinstance(output, tuple):
                return (output[0] * factor,) + tuple(output[1:])
            return output * factor
        return hook

    model.model.embed_tokens.register_forward_hook(scale_output(scale_emb))
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(scale_output(residual))
        layer.mlp.register_forward_hook(scale_output(residual))
    model.lm_head.register_forward_pre_hook(lambda module, args: (args[0] / divisor,) + tuple(args[1:]))


def f32_bytes(t):
    t = t.detach().to(torch.float32).contiguous().reshape(-1).tolist()
    return struct.pack("<%df" % len(t), *t)


@torch.no_grad()
def goldens(model, prompt, decode_tokens):
    # A fresh copy for the greedy run: dynamic RoPE keeps state between forward calls.
    greedy_model = copy.deepcopy(model)
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model(input_ids=ids, use_cache=True)
    prefill = out.logits[0]  # [P, V]
    past = out.past_key_values
    steps = []
    for tok in decode_tokens:
        out = model(input_ids=torch.tensor([[tok]], dtype=torch.long), past_key_values=past, use_cache=True)
        past = out.past_key_values
        steps.append(out.logits[0, -1])
    decode = torch.stack(steps)

    # Greedy decoding by hand (generate() would stop at EOS and depends on generation defaults).
    model = greedy_model
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    logits = out.logits[0, -1]
    greedy, margins = [], []
    for _ in range(GREEDY_STEPS):
        top = torch.topk(logits, 2)
        margins.append(float(top.values[0] - top.values[1]))
        tok = int(top.indices[0])
        greedy.append(tok)
        out = model(input_ids=torch.tensor([[tok]], dtype=torch.long), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1]
    return prefill, decode, greedy, margins


def make_fixture(index, name, family, overrides, rope, storage, extras, out_root):
    torch.manual_seed(1234 + index)
    config = make_config(family, overrides, rope)
    # Extra fields are set as attributes (saved to config.json) since no transformers config class
    # declares them.
    for key, value in extras.get("minicpm", {}).items():
        setattr(config, key, value)
    model = build_model(family, config)
    rotary = model.model.rotary_emb
    assert getattr(rotary, "rope_type", rope["rope_type"]) == rope["rope_type"], (rotary.rope_type, rope)
    randomise(model, 1000 + index)
    if storage == "bf16":
        round_to_bf16(model)
    if extras.get("minicpm"):
        add_minicpm_hooks(model, config)

    gen = torch.Generator().manual_seed(77 + index)
    prompt = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=gen).tolist()
    decode_tokens = torch.randint(3, VOCAB, (DECODE_STEPS,), generator=gen).tolist()
    prefill, decode, greedy, margins = goldens(model, prompt, decode_tokens)

    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    if storage == "bf16":
        model.to(torch.bfloat16)
    model.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "golden_prefill.f32"), "wb") as f:
        f.write(f32_bytes(prefill))
    with open(os.path.join(out_dir, "golden_decode.f32"), "wb") as f:
        f.write(f32_bytes(decode))
    meta = dict(
        family=family,
        storage=storage,
        vocab_size=VOCAB,
        prompt=prompt,
        decode_tokens=decode_tokens,
        greedy_tokens=greedy,
        greedy_min_margin=min(margins),
        max_abs_logit=float(max(prefill.abs().max(), decode.abs().max())),
        rope=rope,
        transformers_version=transformers.__version__,
        torch_version=torch.__version__,
        attn_implementation=model.config._attn_implementation,
    )
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output folder; one subfolder per fixture")
    parser.add_argument("--only", nargs="*", help="fixture names to build (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    failures = []
    for index, (name, family, overrides, rope, storage, extras) in enumerate(FIXTURES):
        if args.only and name not in args.only:
            continue
        try:
            meta = make_fixture(index, name, family, overrides, rope, storage, extras, args.out)
            print(f"{name}: greedy {meta['greedy_tokens']} min margin {meta['greedy_min_margin']:.4g} "
                  f"max |logit| {meta['max_abs_logit']:.4g}")
        except Exception:  # keep building the others; report at the end
            traceback.print_exc()
            failures.append(name)
    if failures:
        print("FAILED:", ", ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
