"""The rows the batched engine (models/batching.py) decodes together, and the KV tensor work behind them:
joining rows left-padded to a common width, dropping finished rows and the columns no row uses any more,
building a batch cache from prompt-cache entries.

All of it needs plain per-layer KV tensors (transformers' DynamicCache of DynamicLayer, `plain_layers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .engine_front import Request
from .prefix_cache import CacheEntry


@dataclass
class Row:
    request: Request
    generator: Any
    position: int  # the position id of the next token fed for this row


@dataclass
class LiveBatch:
    """The rows decoding together: their KV cache (batch x heads x columns x dim per layer) and the
    attention mask over its columns (a row's own tokens are 1, padding and holes 0)."""

    rows: list[Row] = field(default_factory=list)
    cache: Any = None
    mask: Any = None

    def join(self, rows: list[Row], cache, mask) -> None:
        if not self.rows:
            self.rows, self.cache, self.mask = list(rows), cache, mask
            return
        import torch

        width = max(self.mask.shape[1], mask.shape[1])
        ours, theirs = layer_tensors(self.cache), layer_tensors(cache)
        layers = [(torch.cat([pad_left(k1, width), pad_left(k2, width)]),
                   torch.cat([pad_left(v1, width), pad_left(v2, width)]))
                  for (k1, v1), (k2, v2) in zip(ours, theirs, strict=True)]
        self.cache = dynamic_cache(layers)
        self.mask = torch.cat([pad_left_mask(self.mask, width), pad_left_mask(mask, width)])
        self.rows += rows

    def keep(self, indices: list[int]) -> None:
        """Only these rows stay; columns no remaining row uses are cut from the left."""
        if not indices:
            self.rows, self.cache, self.mask = [], None, None
            return
        import torch

        if len(indices) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in indices]
        selected = torch.tensor(indices, device=self.mask.device)
        self.mask = self.mask[selected]
        if not plain_layers(self.cache):  # e.g. sliding-window layers: the cache selects its own rows
            self.cache.batch_select_indices(selected)
            return
        used = self.mask.any(dim=0).nonzero()
        start = int(used[0]) if len(used) else 0
        self.mask = self.mask[:, start:]
        self.cache = dynamic_cache([(k[selected][:, :, start:], v[selected][:, :, start:])
                                     for k, v in layer_tensors(self.cache)])


def layer_tensors(cache) -> list[tuple[Any, Any]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


def plain_layers(cache) -> bool:
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return False
    return type(cache) is DynamicCache and all(type(layer) is DynamicLayer for layer in cache.layers)


def dynamic_cache(layers):
    from transformers.cache_utils import DynamicCache

    return DynamicCache(layers)


def cache_from_entries(entries: list[CacheEntry | None], reuse: list[int], width: int, device):
    """A batch cache of `width` columns: each row's reused prefix right-aligned, zeros (masked) before it."""
    import torch

    template = next(entry for entry in entries if entry is not None)
    layers = []
    for layer, (keys, values) in enumerate(template.layers):
        shape = (len(entries), keys.shape[1], width, keys.shape[3])
        batch_keys = torch.zeros(shape, dtype=keys.dtype, device=device)
        batch_values = torch.zeros((len(entries), values.shape[1], width, values.shape[3]), dtype=values.dtype,
                                   device=device)
        for row, (entry, n) in enumerate(zip(entries, reuse, strict=True)):
            if entry is not None and n:
                batch_keys[row, :, width - n:] = entry.layers[layer][0][0, :, :n]
                batch_values[row, :, width - n:] = entry.layers[layer][1][0, :, :n]
        layers.append((batch_keys, batch_values))
    return dynamic_cache(layers)


def pad_left(tensor, width: int):
    import torch

    missing = width - tensor.shape[2]
    if not missing:
        return tensor
    shape = (tensor.shape[0], tensor.shape[1], missing, tensor.shape[3])
    return torch.cat([tensor.new_zeros(shape), tensor], dim=2)


def pad_left_mask(mask, width: int):
    import torch

    missing = width - mask.shape[1]
    return mask if not missing else torch.cat([mask.new_zeros((mask.shape[0], missing)), mask], dim=1)
