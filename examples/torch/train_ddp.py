#!/usr/bin/python3
"""train_ddp.py — an ordinary DistributedDataParallel training script.

The backend is the only difference between Loom and gloo:

    torchrun --nproc-per-node 2 examples/torch/train_ddp.py --backend loom
    torchrun --nproc-per-node 2 examples/torch/train_ddp.py --backend gloo

Without torchrun it starts the ranks itself (--nprocs, on 127.0.0.1):

    examples/torch/train_ddp.py --backend loom --nprocs 2 --steps 20

The model is an MLP of about 9.5 M parameters (38 MB of float32 gradients,
a bit more than DDP's default 25 MB bucket), trained on synthetic data with
fixed seeds, so runs are repeatable.  The default batch is small (4 per
rank), so that a step moves as much gradient data as it computes on, as in
data-parallel training of large models; --batch changes it.  Rank 0 prints the loss every few
steps and the mean step time after the warm-up steps.
"""

import argparse
import datetime
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

IN_FEATURES, WIDTH, CLASSES = 512, 2048, 10
VOCAB, EMBED_DIM, TOKENS = 100000, 128, 64
MODELS = ("mlp", "embedding")


def make_model(kind="mlp", depth=4):
    """mlp: 512 -> 2048 -> ... -> 2048 -> 10 (`depth` linear layers).
    embedding: a bag-of-words text classifier, a 100k x 128 embedding
    (mean of a sample's tokens) -> 10; its gradient is dense, as DDP
    reduces it."""
    torch.manual_seed(0)
    if kind == "embedding":
        return torch.nn.Sequential(torch.nn.EmbeddingBag(VOCAB, EMBED_DIM, mode="mean"),
                                   torch.nn.Linear(EMBED_DIM, CLASSES))
    layers = [torch.nn.Linear(IN_FEATURES, WIDTH), torch.nn.ReLU()]
    for _ in range(depth - 2):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(WIDTH, CLASSES))
    return torch.nn.Sequential(*layers)


def synthetic_batches(rank, steps, batch, kind="mlp"):
    g = torch.Generator().manual_seed(1234 + rank)
    if kind == "embedding":
        return [(torch.randint(0, VOCAB, (batch, TOKENS), generator=g),
                 torch.randint(0, CLASSES, (batch,), generator=g)) for _ in range(steps)]
    return [(torch.randn(batch, IN_FEATURES, generator=g),
             torch.randint(0, CLASSES, (batch,), generator=g)) for _ in range(steps)]


def train_step(model, optimizer, inputs, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    loss.backward()  # DDP all-reduces the gradient buckets during this
    optimizer.step()
    return loss.item()


def train(rank, world_size, args):
    torch.set_num_threads(args.threads)
    if args.backend == "loom":
        import loom_torch  # noqa: F401  (registers the "loom" backend)
    dist.init_process_group(args.backend, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    model = DDP(make_model(args.model))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    times = []
    for step, (x, y) in enumerate(synthetic_batches(rank, args.steps, args.batch, args.model)):
        start = time.perf_counter()
        loss = train_step(model, optimizer, x, y)
        times.append(time.perf_counter() - start)
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print("step %3d  loss %.4f  %.1f ms" % (step, loss, times[-1] * 1e3), flush=True)
    measured = times[args.warmup:] or times
    if rank == 0:
        print("%s, %d ranks, %s: mean step %.1f ms over %d steps (after %d warm-up)"
              % (args.backend, world_size, args.model, 1e3 * sum(measured) / len(measured),
                 len(measured), min(args.warmup, len(times))))
    dist.destroy_process_group()


def spawned(rank, world_size, args):
    train(rank, world_size, args)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="loom", choices=["loom", "gloo"])
    p.add_argument("--nprocs", type=int, default=2, help="ranks to start without torchrun")
    p.add_argument("--model", default="mlp", choices=MODELS,
                   help="mlp (compute and communication) or embedding (communication-bound)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the mean")
    p.add_argument("--batch", type=int, default=4,
                   help="samples per rank and step (small: gradient traffic dominates)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--timeout", type=int, default=300, help="process group timeout (s)")
    args = p.parse_args()
    if "RANK" in os.environ:  # torchrun (env://)
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(spawned, args=(args.nprocs, args), nprocs=args.nprocs)


if __name__ == "__main__":
    main()
