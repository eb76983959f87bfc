"""A BERT-style sentence classifier from Hugging Face transformers: the user's own workload
when the model takes several inputs and computes its own loss.

The model is built from a small config with random weights: nothing is downloaded (a cell has
no network). Its inputs are a dict (``input_ids``, ``attention_mask``, ``labels``): bench calls
``model(**inputs)``, and the model returns a ``SequenceClassifierOutput`` whose ``loss`` is
the one trained, whose ``logits`` accuracy reads against ``labels``. The targets are ``None``
for that reason. transformers is declared on the environment
(``packages: ["transformers==5.25.0"]``) and locked with the stack.

The task is seeded and synthetic, in the shape of a review data set: sequences of 16-64
tokens padded to 64, label 1 where the sequence holds the "positive" token, 0 where it holds
the "negative" one. A model that learns where to look gets it right.
"""
from __future__ import annotations

import torch
from transformers import BertConfig, BertForSequenceClassification

LENGTH = 64          # tokens per sequence, padding included (what the model computes on)
VOCABULARY = 1000
PAD, POSITIVE, NEGATIVE = 0, 3, 4
TRAIN, TEST = 4096, 1024  # sequences, unless the matrix's limits ask for fewer


def _reviews(count, seed):
    """input_ids, attention_mask and labels for ``count`` seeded sequences."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCABULARY, (count, LENGTH), generator=generator)
    lengths = torch.randint(16, LENGTH + 1, (count,), generator=generator)
    mask = (torch.arange(LENGTH)[None, :] < lengths[:, None]).long()
    labels = torch.randint(0, 2, (count,), generator=generator)
    # The telling token somewhere inside each sequence's real (unpadded) part.
    where = (torch.rand(count, generator=generator) * lengths).long()
    ids[torch.arange(count), where] = torch.where(labels == 1, POSITIVE, NEGATIVE)
    ids = ids * mask  # padding is token 0
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def build(ctx):
    config = BertConfig(vocab_size=VOCABULARY, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=512,
                        max_position_embeddings=LENGTH, num_labels=2, pad_token_id=PAD)
    torch.manual_seed(ctx.seed)  # the same random weights in every environment
    model = BertForSequenceClassification(config)
    train = _reviews(min(TRAIN, ctx.limit or TRAIN), ctx.seed)
    test = _reviews(min(TEST, ctx.limit_test or TEST), ctx.seed + 1)
    return {
        "model": model,
        "train": (train, None),  # no targets: the model's own loss, from inputs["labels"]
        "test": (test, None),
        "unit": "tokens",
        "units_per_sample": LENGTH,
        "quality": "accuracy",
        "optimizer": lambda parameters: torch.optim.AdamW(parameters, lr=5e-4,
                                                          weight_decay=0.01),
    }
