#!/usr/bin/env python3
"""Train kvlm's bundled default model on the accelerator machine, then write its oracle goldens.

Steps (all seeded):
  1. byte-level BPE tokenizer (8,192 ids incl. ChatML specials) trained with HF `tokenizers`
     on the training split;
  2. a Llama-architecture causal LM (GQA, RoPE, SwiGLU, RMSNorm, tied embeddings) trained from
     scratch on the training split plus ~10% ChatML dialogues built from it (a sentence as the
     user turn, the next sentence as the assistant turn), keeping the checkpoint with the best
     validation loss;
  3. saved in Hugging Face format (bf16 safetensors), reloaded in fp32, and measured with
     transformers: validation perplexity (strided windows), prefill and teacher-forced logits,
     greedy continuations. These are the goldens kvlm's tests compare against.

Run (see tools/README.md):  python3 tools/default_model/train.py --corpus .corpus --out $OUT
"""
import argparse
import json
import math
import os
import random
import struct
import tarfile
import time

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SEED = 1234
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
MODEL_SHAPE = dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8,
                   num_attention_heads=6, num_key_value_heads=2)
GOLDEN_PROMPTS = ["The jury said", "In the morning, she", "The results of the study show",
                  "He looked at the"]
PPL_SETTINGS = [  # (context, stride, max_tokens or None for the whole validation text)
    (512, 256, None), (512, 512, None), (256, 128, 1024)]


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def chat_dialogues(docs, rng, count):
    lines = [ln for d in docs for ln in d.split("\n") if 20 <= len(ln) <= 300]
    out = []
    for _ in range(count):
        i = rng.randrange(len(lines) - 1)
        msgs = []
        if rng.random() < 0.3:
            msgs.append({"role": "system", "content": "You continue English text."})
        msgs.append({"role": "user", "content": lines[i]})
        msgs.append({"role": "assistant", "content": lines[i + 1]})
        out.append("".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs))
    return out


def train_tokenizer(docs, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer)
    return tok


def save_tokenizer(tok, out_dir):
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", unk_token=None, bos_token=None)
    fast.chat_template = CHATML_TEMPLATE
    fast.model_max_length = 2048
    fast.save_pretrained(out_dir)
    # transformers 5 may write the template to chat_template.jinja; kvlm reads either, but the
    # model card promises it inside tokenizer_config.json, so put it there as well.
    cfg_path = os.path.join(out_dir, "tokenizer_config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["chat_template"] = CHATML_TEMPLATE
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
    jinja = os.path.join(out_dir, "chat_template.jinja")
    if os.path.exists(jinja):
        os.remove(jinja)
    return fast


def token_stream(fast, texts, eos_id):
    ids = []
    enc = fast(texts, add_special_tokens=False)["input_ids"]
    for e in enc:
        ids.extend(e)
        ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def eval_loss(model, data, seq_len, batches, batch_size):
    model.eval()
    n = (len(data) - 1) // seq_len
    losses = []
    for b in range(min(batches, max(1, n // batch_size))):
        rows = [data[(b * batch_size + i) * seq_len:(b * batch_size + i) * seq_len + seq_len + 1]
                for i in range(batch_size) if (b * batch_size + i) < n]
        x = torch.stack([r[:-1] for r in rows]).cuda()
        y = torch.stack([r[1:] for r in rows]).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        losses.append(torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                                        y.reshape(-1)).item())
    model.train()
    return sum(losses) / len(losses)


def train_model(args, train_ids, valid_ids, vocab_size, eos_id, logf):
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=2048, rms_norm_eps=1e-5,
                         tie_word_embeddings=True, bos_token_id=eos_id,
                         eos_token_id=eos_id, pad_token_id=eos_id, attention_bias=False,
                         mlp_bias=False, initializer_range=0.02, **MODEL_SHAPE)
    model = LlamaForCausalLM(config).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"parameters: {n_params}", logf)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=True)
    seq, bs = args.seq_len, args.batch_size
    n_windows = (len(train_ids) - 1) // seq
    gen = torch.Generator().manual_seed(SEED)
    best, best_state, start = float("inf"), None, time.time()
    step = 0
    while step < args.steps and time.time() - start < args.time_budget:
        perm = torch.randperm(n_windows, generator=gen)
        for i in range(0, n_windows - bs + 1, bs):
            if step >= args.steps or time.time() - start >= args.time_budget:
                break
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * (
                0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(step, args.steps) / args.steps)))
            for g in opt.param_groups:
                g["lr"] = lr
            idx = perm[i:i + bs]
            rows = torch.stack([train_ids[j * seq:j * seq + seq + 1] for j in idx.tolist()]).cuda()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=rows[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab_size),
                                                     rows[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % args.eval_every == 0 or step == args.steps:
                vl = eval_loss(model, valid_ids, seq, 8, bs)
                log(f"step {step} epoch {step * bs / n_windows:.2f} lr {lr:.2e} train_loss "
                    f"{loss.item():.4f} valid_loss {vl:.4f} elapsed {time.time() - start:.0f}s", logf)
                if vl < best:
                    best = vl
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    log(f"trained {step} steps in {time.time() - start:.0f}s; best valid_loss {best:.4f}", logf)
    model.load_state_dict(best_state)
    return model, n_params


@torch.no_grad()
def strided_perplexity(model, ids, context, stride):
    """HF's strided-window method, token-weighted: each window [begin, begin+context) scores only
    the tokens not scored by the previous window; every token but the first is scored once."""
    nll_sum, count, prev_end = 0.0, 0, 0
    n = len(ids)
    for begin in range(0, n, stride):
        end = min(begin + context, n)
        x = ids[begin:end].unsqueeze(0).cuda()
        logp = torch.log_softmax(model(input_ids=x).logits[0].double(), dim=-1)
        first = max(prev_end, begin + 1)  # absolute position of the first scored target
        targets = ids[first:end].cuda()
        rows = torch.arange(first - begin - 1, end - begin - 1, device="cuda")
        nll_sum -= logp[rows, targets].sum().item()
        count += end - first
        prev_end = end
        if end == n:
            break
    return math.exp(nll_sum / count), count, nll_sum / count


@torch.no_grad()
def greedy_tokens(model, ids, count):
    """Argmax decoding by full forward passes: no cache, no stopping, no logits processors."""
    seq = list(ids)
    for _ in range(count):
        logits = model(input_ids=torch.tensor([seq]).cuda()).logits[0, -1]
        seq.append(int(torch.argmax(logits).item()))
    return seq[len(ids):]


def write_f32(path, tensor):
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{tensor.numel()}f", *tensor.flatten().tolist()))


@torch.no_grad()
def make_goldens(model_dir, valid_text, golden_dir, logf):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    fast = PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                             attn_implementation="eager").cuda().eval()
    goldens = {"prompts": [], "perplexity": []}
    for i, prompt in enumerate(GOLDEN_PROMPTS):
        ids = fast(prompt, add_special_tokens=False)["input_ids"]
        greedy = greedy_tokens(model, ids, 32)
        # Teacher-forced logits over prompt + the first 16 greedy tokens, every position.
        seq = ids + greedy[:16]
        logits = model(input_ids=torch.tensor([seq]).cuda()).logits[0].float().cpu()
        write_f32(os.path.join(golden_dir, f"prompt{i}_logits.f32"), logits)
        goldens["prompts"].append({"text": prompt, "ids": ids, "greedy": greedy,
                                   "greedy_text": fast.decode(greedy), "logits_file":
                                   f"prompt{i}_logits.f32", "logits_shape": list(logits.shape)})
        log(f"golden {prompt!r} -> {fast.decode(greedy)!r}", logf)
    ids = torch.tensor(fast(valid_text, add_special_tokens=False)["input_ids"])
    for context, stride, max_tokens in PPL_SETTINGS:
        sub = ids if max_tokens is None else ids[:max_tokens]
        ppl, count, nll = strided_perplexity(model, sub, context, stride)
        goldens["perplexity"].append({"context": context, "stride": stride,
                                      "max_tokens": max_tokens, "tokens": len(sub),
                                      "scored": count, "mean_nll": nll, "perplexity": ppl})
        log(f"perplexity context {context} stride {stride} tokens {len(sub)}: {ppl:.4f}", logf)
    with open(os.path.join(golden_dir, "goldens.json"), "w") as f:
        json.dump(goldens, f, indent=1)
    return goldens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--time-budget", type=float, default=300.0, help="seconds of training at most")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--chat-fraction", type=float, default=0.1)
    args = ap.parse_args()
    random.seed(SEED)
    torch.manual_seed(SEED)
    work = "/tmp/kvlm_default"
    model_dir, golden_dir = os.path.join(work, "model"), os.path.join(work, "goldens")
    os.makedirs(model_dir, exist_ok=True)
    os.makedirs(golden_dir, exist_ok=True)
    logf = open(os.path.join(work, "train.log"), "w")
    log(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", logf)

    t0 = time.time()
    train_docs = read_docs(os.path.join(args.corpus, "train.jsonl"))
    with open(os.path.join(args.corpus, "valid.txt"), encoding="utf-8") as f:
        valid_text = f.read()
    tok = train_tokenizer(train_docs, args.vocab_size)
    fast = save_tokenizer(tok, model_dir)
    eos_id = tok.token_to_id("<|endoftext|>")
    log(f"tokenizer: {tok.get_vocab_size()} ids in {time.time() - t0:.0f}s", logf)

    rng = random.Random(SEED)
    train_ids = token_stream(fast, train_docs, eos_id)
    n_chat = int(args.chat_fraction * len(train_ids) / 40)  # a dialogue is ~40 tokens
    chats = chat_dialogues(train_docs, rng, n_chat)
    chat_ids = token_stream(fast, chats, eos_id)
    # Interleave chat in 16 slices so every epoch window mix sees some.
    parts, step_t, step_c = [], (len(train_ids) + 15) // 16, (len(chat_ids) + 15) // 16
    for k in range(16):
        parts += [train_ids[k * step_t:(k + 1) * step_t], chat_ids[k * step_c:(k + 1) * step_c]]
    all_ids = torch.cat(parts)
    valid_ids = torch.tensor(fast(valid_text, add_special_tokens=False)["input_ids"])
    log(f"tokens: train {len(train_ids)} + chat {len(chat_ids)} ({len(chats)} dialogues); "
        f"valid {len(valid_ids)}", logf)

    model, n_params = train_model(args, all_ids, valid_ids, tok.get_vocab_size(), eos_id, logf)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = [eos_id, tok.token_to_id("<|im_end|>")]
    model.generation_config.bos_token_id = eos_id
    model.generation_config.pad_token_id = eos_id
    model.save_pretrained(model_dir, safe_serialization=True, max_shard_size="1GB")
    log(f"saved; total {time.time() - t0:.0f}s", logf)

    goldens = make_goldens(model_dir, valid_text, golden_dir, logf)
    summary = {"parameters": n_params, "train_tokens": len(train_ids), "chat_tokens": len(chat_ids),
               "valid_tokens": len(valid_ids), "seconds": time.time() - t0,
               "perplexity": goldens["perplexity"]}
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    logf.close()

    # At most 16 MB a returned file: split the weights, pack the rest.
    weights = os.path.join(model_dir, "model.safetensors")
    with open(weights, "rb") as f:
        part = 0
        while chunk := f.read(15_000_000):
            with open(os.path.join(args.out, f"model.safetensors.part{part}"), "wb") as g:
                g.write(chunk)
            part += 1
    with tarfile.open(os.path.join(args.out, "meta.tgz"), "w:gz") as tar:
        for name in sorted(os.listdir(model_dir)):
            if name != "model.safetensors":
                tar.add(os.path.join(model_dir, name), arcname=f"model/{name}")
        tar.add(golden_dir, arcname="goldens")
        tar.add(os.path.join(work, "train.log"), arcname="train.log")
        tar.add(os.path.join(work, "summary.json"), arcname="summary.json")


if __name__ == "__main__":
    main()
