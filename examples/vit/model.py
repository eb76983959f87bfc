"""ViT (Dosovitskiy et al. 2021) sized for 32x32 images: 4x4 patches, a class token, learned
positions, pre-norm transformer blocks; 1.8 M parameters at width 192 and depth 6."""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads, mlp):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp), nn.GELU(), nn.Linear(mlp, width))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, image, patch, classes, width, depth, heads, mlp):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(3 * patch * patch, width)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.position = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, width))
        self.blocks = nn.Sequential(*[Block(width, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, images):
        x = rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=self.patch,
                      p2=self.patch)
        x = self.embed(x)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.position
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])
