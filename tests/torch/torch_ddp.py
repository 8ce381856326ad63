"""torch_ddp.py — DistributedDataParallel on the "loom" backend against the
same training on "gloo", in the same processes: same seed, same data, small
buckets (so several all-reduces are in flight during the backward pass).

With 2 ranks the parameters must equal gloo's bit for bit after every step
(DDP divides by 2, then sums two numbers: the same in any order); with 3 or
4 they must agree within float tolerance.  A second phase runs both with
DDP's fp16_compress_hook, whose future callbacks decompress the result
(bit for bit with 2 ranks again; within half precision with 3 or 4).

Run by test_torch.sh: torch_ddp.py --launch N.
"""

import copy
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import loom_torch  # noqa: E402,F401  (registers "loom")

STEPS = 8


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(20, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5))


def batches(rank):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(16, 20, generator=g), torch.randn(16, 5, generator=g))
            for _ in range(STEPS)]


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()


def compare(c, a, b, exact, rtol, what):
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        if exact:
            c.equal(pa.detach(), pb.detach(), "%s: %s" % (what, name))
        else:
            c.close(pa.detach(), pb.detach(), "%s: %s" % (what, name), rtol=rtol, atol=rtol / 10)


def same_on_every_rank(c, model, n, what):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    outs = [torch.zeros_like(flat) for _ in range(n)]
    dist.all_gather(outs, flat)
    for q in range(n):
        c.equal(outs[q], flat, "%s: rank %d's parameters equal this rank's" % (what, q))


def phase(args, c, gloo, hook, rtol, what):
    exact = args.nranks == 2
    base = make_model()
    models = {"loom": copy.deepcopy(base), "gloo": copy.deepcopy(base)}
    ddp = {
        "loom": DDP(models["loom"], bucket_cap_mb=0.005),
        "gloo": DDP(models["gloo"], process_group=gloo, bucket_cap_mb=0.005),
    }
    if hook is not None:
        ddp["loom"].register_comm_hook(None, hook)
        ddp["gloo"].register_comm_hook(gloo, hook)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for k, m in ddp.items()}
    for step, (x, y) in enumerate(batches(args.rank)):
        for k in ("loom", "gloo"):
            train_step(ddp[k], opts[k], x, y)
        compare(c, models["loom"], models["gloo"], exact, rtol, "%s step %d" % (what, step))
    c.true(any(not torch.equal(p, q) for p, q in
               zip(base.parameters(), models["loom"].parameters())), what + ": the model trained")
    same_on_every_rank(c, models["loom"], args.nranks, what)


def main(args, c):
    harness.init(args, "loom", timeout_s=60)
    gloo = dist.new_group(backend="gloo")
    phase(args, c, gloo, None, 1e-5, "DDP")
    # float16 sums of 3-4 values round differently in another order (Loom
    # adds in float32 and rounds each step): half precision's tolerance.
    phase(args, c, gloo, default_hooks.fp16_compress_hook, 1e-3, "DDP fp16_compress_hook")
    dist.destroy_process_group()


if __name__ == "__main__":
    harness.run(main)
