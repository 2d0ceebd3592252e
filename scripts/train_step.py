#!/usr/bin/env python3
"""Two training steps of one of the lab's model presets, then what the allocator says of them, as JSON.

The GPU check records this script with ``python -m core record`` and imports the snapshot back: the
snapshot's peak (requested bytes) must equal the allocator's ``requested_bytes.all.peak`` read here, in the
recorded process itself, and stay under ``max_memory_allocated`` (the blocks those requests took).

    python scripts/train_step.py OUT.json [--model small] [--precision bf16-autocast] [--batch 4] [--context 256]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("output", help="JSON file to write")
    parser.add_argument("--model", default="small")
    parser.add_argument("--precision", default="bf16-autocast")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--context", type=int, default=256)
    args = parser.parse_args(argv)

    import torch

    from core.transformer.model import build_model, random_batch
    from core.transformer.presets import get_preset
    from core.transformer.training import autocast, make_optimizer, param_dtype

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    preset = get_preset(args.model)
    model = build_model(preset, args.context, device, param_dtype(args.precision))
    optimizer = make_optimizer("adamw", model.parameters())
    generator = torch.Generator(device).manual_seed(0)

    def step() -> torch.Tensor:
        tokens, targets = random_batch(args.batch, args.context, preset.vocab_size, device, generator)
        with autocast(args.precision, str(device)):
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    step()
    loss = step()  # the second step holds the optimizer's state from the first
    out = {"cuda": cuda, "model": args.model, "precision": args.precision, "loss": loss.item()}
    if cuda:
        torch.cuda.synchronize(device)
        out |= {
            "device": torch.cuda.get_device_name(device),
            "max_memory_allocated": torch.cuda.max_memory_allocated(device),  # blocks, rounded up
            "requested_peak": torch.cuda.memory_stats(device)["requested_bytes.all.peak"],  # what tensors asked for
            "memory_allocated": torch.cuda.memory_allocated(device),
        }
    Path(args.output).write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
