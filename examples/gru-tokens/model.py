"""An embedding, a two-layer GRU and a linear head on its last state."""
from __future__ import annotations

from torch import nn


class GRUClassifier(nn.Module):
    def __init__(self, vocabulary, width, classes):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.gru = nn.GRU(width, width, num_layers=2, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens):
        states, _ = self.gru(self.embed(tokens))
        return self.head(states[:, -1])
