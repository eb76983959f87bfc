"""gpt-tiny and gpt2-small: a GPT-2-style decoder on seeded synthetic tokens, in tokens/s.

The model is GPT-2's (Radford et al. 2019) as nanoGPT writes it: learned token and position
embeddings, pre-norm blocks of causal self-attention and a 4x GELU MLP, a final layer norm and
a language-model head tied to the token embedding; no dropout, weights drawn from N(0, 0.02).

Attention is torch's fused ``scaled_dot_product_attention`` where the image's torch has it
(2.0 on) and the explicit softmax(QK^T / sqrt(d)) V with a causal mask where it does not; the
record says which ran, so a torch 1.12 stack against a 2.x stack shows what fusing buys.

Sizes:
  gpt-tiny    4 layers, width 192, 6 heads, 128 tokens, vocabulary 512: 1.9 M parameters,
              small enough for a CPU cell and the tests.
  gpt2-small  GPT-2 small's shape: 12 layers, width 768, 12 heads, 1024 tokens, vocabulary
              50304 (GPT-2's 50257 padded to a multiple of 64, as nanoGPT does for speed):
              124 M parameters.
A sample is one sequence; the page counts tokens (a sequence's length each). AdamW with
nanoGPT's betas (0.9, 0.95) and weight decay 0.1 on the matrices.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from bench import datasets, workloads


@dataclass(frozen=True)
class GPTShape:
    """One GPT's shape and its synthetic data set, by name (nanoGPT's GPTConfig, smaller)."""

    layers: int        # transformer blocks
    width: int         # embedding width (n_embd)
    heads: int         # attention heads; width divides by them
    length: int        # tokens per sequence (the context: one sample)
    vocabulary: int    # token ids; GPT-2's 50257 padded to 50304, a multiple of 64, as nanoGPT
    train: int         # synthetic train sequences (before --limit)
    test: int          # synthetic test sequences (before --limit-test)


SHAPES = {
    "gpt-tiny": GPTShape(layers=4, width=192, heads=6, length=128, vocabulary=512,
                         train=2048, test=256),
    "gpt2-small": GPTShape(layers=12, width=768, heads=12, length=1024, vocabulary=50304,
                           train=1024, test=64),
}


def has_fused_attention():
    return hasattr(F, "scaled_dot_product_attention")


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, length, fused):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.fused = fused
        # The causal mask of the explicit path: a plain attribute made on the input's device,
        # not a buffer, which DDP would broadcast every step (and gloo refuses bool tensors).
        self.causal = None

    def attention_macs(self, x):
        """Multiply-adds of QK^T and of the weights times V (bench.workloads.flops's hooks;
        the projections are linear layers, counted on their own)."""
        batch, length, width = x.shape
        return 2 * batch * length * length * width

    def _causal(self, length, device):
        """True where a position may attend: itself and the positions before it."""
        mask = self.causal
        if mask is None or mask.device != device or mask.shape[0] < length:
            mask = torch.ones(length, length, dtype=torch.bool, device=device).tril()
            self.causal = mask
        return mask[:length, :length]

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        shape = (batch, length, self.heads, width // self.heads)
        q, k, v = (t.view(*shape).transpose(1, 2) for t in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            scores = scores.masked_fill(~self._causal(length, x.device), float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, length, width))


class Block(nn.Module):
    def __init__(self, width, heads, length, fused):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads, length, fused)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, length, vocab, fused):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(length, width)
        self.blocks = nn.Sequential(*[Block(width, heads, length, fused) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.token.weight  # tied, as GPT-2's
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    @classmethod
    def of(cls, shape, fused):
        """The model of a GPTShape; ``fused``: attention through scaled_dot_product_attention."""
        return cls(shape.layers, shape.width, shape.heads, shape.length, shape.vocabulary, fused)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        return self.head(self.ln(self.blocks(x)))


def _adamw(lr, beta1, weight_decay):
    def optimizer(parameters):
        parameters = [p for p in parameters if p.requires_grad]
        # Weight decay on the matrices (embeddings and linear weights), not on biases and
        # layer norms, as nanoGPT and GPT-2 do.
        groups = [{"params": [p for p in parameters if p.dim() >= 2],
                   "weight_decay": weight_decay},
                  {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=(beta1, 0.95))
    return optimizer


def build(ctx):
    """Seeded tokens, then the model; the loss is the contract's default (cross entropy over
    every position), the quality the test loss, with next-token accuracy beside it."""
    shape = SHAPES[ctx.workload]
    attention = "sdpa" if has_fused_attention() else "explicit"
    train, test = datasets.synthetic_tokens(ctx.seed, shape.vocabulary, shape.length,
                                            shape.train, shape.test, limit=ctx.limit,
                                            limit_test=ctx.limit_test)
    return {"model": GPT.of(shape, attention == "sdpa"), "train": train, "test": test,
            "inputs": "tensors", "unit": "tokens", "units_per_sample": shape.length,
            "quality": "loss", "accuracy": True, "attention": attention,
            "optimizer": _adamw(ctx.lr, ctx.momentum,
                                workloads.info(ctx.workload).weight_decay),
            "record": {"sequence_length": shape.length, "vocabulary": shape.vocabulary}}
