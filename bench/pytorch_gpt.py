#!/usr/bin/python3
"""The peer: bamboo's benchmark GPT as an ordinary PyTorch training script.

What a PyTorch user would write for the model bamboo trains (bamboo/model/gpt,
layers.cpp): token + position embeddings, pre-LayerNorm blocks (fused qkv
projection, causal softmax attention, GELU MLP of 4 x d), final LayerNorm and
a vocabulary head; dropout after the embeddings, on the attention weights and
after each residual branch; AdamW (betas 0.9/0.95, weight decay 0.1) with
linear warm-up and cosine decay to 0.1 x lr, global-norm clipping at 1.0; the
global batch accumulated over micro-batches. One process, eager mode, as the
PyTorch tutorials train.

  --write-data FILE   writes a uint16 token file (the same kind of corpus as
                      bamboo's "synthetic": each token has three likely
                      successors), for both sides to train on, and exits.
  --data FILE         trains on that file; prints one JSON line per step:
                      {"step": k, "loss": ..., "seconds": ...}.

Run it with Debian's interpreter (/usr/bin/python3, package python3-torch).
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt_options import add_model_options


def write_data(path, vocab, tokens, seed):
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, vocab, size=(vocab, 3))
    u = rng.random(tokens)
    rand = rng.integers(0, vocab, size=tokens)
    out = np.empty(tokens, dtype=np.uint16)
    cur = int(rng.integers(0, vocab))
    for i in range(tokens):
        out[i] = cur
        if u[i] < 0.6:
            cur = nxt[cur, 0]
        elif u[i] < 0.85:
            cur = nxt[cur, 1]
        elif u[i] < 0.95:
            cur = nxt[cur, 2]
        else:
            cur = rand[i]
    out.astype("<u2").tofile(path)


class Block(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.heads, self.p = heads, p
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def attention(self, x, mask):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, hd).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(mask[:t, :t], float("-inf"))
        att = F.dropout(att.softmax(-1), self.p, self.training)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return F.dropout(self.proj(y), self.p, self.training)

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.p, self.training)


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, d, heads, layers, p):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq_len, d))
        self.blocks = nn.ModuleList(Block(d, heads, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.p = p
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1))
        for name, w in self.named_parameters():  # as bamboo: N(0, 0.02), zero biases
            if w.dim() == 2:
                nn.init.normal_(w, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(w)

    def forward(self, ids):
        x = F.dropout(self.tok(ids) + self.pos[: ids.size(1)], self.p, self.training)
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln_f(x))


def lr_at(step, steps, lr, warmup, min_ratio=0.1):
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, steps - warmup)
    progress = min(1.0, (step - warmup) / span)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


class Training:
    """What every peer trains from the options: the token file, the seeded
    sample order, the model and AdamW (as bamboo: matrices decay; biases,
    LayerNorm gains and positions do not)."""

    def __init__(self, a):
        torch.manual_seed(a.seed)
        self.a = a
        self.tokens = torch.from_numpy(np.fromfile(a.data, dtype="<u2").astype(np.int64))
        self.samples = (self.tokens.numel() - 1) // a.seq_len
        self.order = torch.randperm(self.samples)
        self.offsets = torch.arange(a.seq_len + 1)
        self.model = GPT(a.vocab, a.seq_len, a.d_model, a.heads, a.layers, a.dropout)
        named = list(self.model.named_parameters())
        decay = [p for n, p in named if p.dim() == 2 and n != "pos"]
        rest = [p for n, p in named if p.dim() != 2 or n == "pos"]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    def rows(self, step, j):
        """Micro-batch j of `step`: its samples' tokens, one more than the length."""
        a = self.a
        first = (step * a.global_batch + j * a.micro_batch) % self.samples
        idx = self.order[first: first + a.micro_batch]
        return self.tokens[(idx * a.seq_len).unsqueeze(1) + self.offsets]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-data")
    ap.add_argument("--data")
    ap.add_argument("--tokens", type=int, default=1 << 18)
    add_model_options(ap)
    a = ap.parse_args()
    if a.write_data:
        write_data(a.write_data, a.vocab, a.tokens, a.seed)
        return 0
    if not a.data:
        ap.error("give --data FILE (or --write-data FILE)")
    torch.set_num_threads(a.threads)
    t = Training(a)
    model, opt = t.model, t.opt
    micro = a.global_batch // a.micro_batch
    for step in range(a.steps):
        start = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.steps, a.lr, a.warmup)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for j in range(micro):
            rows = t.rows(step, j)
            logits = model(rows[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), rows[:, 1:].reshape(-1))
            (loss / micro).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seconds = time.perf_counter() - start
        print(json.dumps({"step": step, "loss": total / micro, "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
