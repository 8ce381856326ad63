"""torch_ops.py — every operation of the "loom" backend on N ranks, checked
exactly against analytic results (integers, and floats that are small
integers, exact in every dtype) and against gloo's results on the same
random data; subgroups, asynchronous work and futures; bad input.

Run by test_torch.sh: torch_ops.py --launch N.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import loom_torch  # noqa: E402,F401  (registers "loom")

INT_TYPES = [torch.uint8, torch.int8, torch.int32, torch.int64]
FLOAT_TYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
DTYPES = INT_TYPES + FLOAT_TYPES
SIZES = [1, 13, 1000]


def pattern(dtype, numel, seed):
    """Small non-negative integers (< 20) that differ by seed: exact in every
    dtype, and sums over 4 ranks fit int8."""
    v = (torch.arange(numel, dtype=torch.int64) * 3 + seed * 7) % 20
    if dtype == torch.bool:
        return (v % 2).bool()
    return v.to(dtype)


def world(args):
    return args.rank, args.nranks


# ---- reductions ------------------------------------------------------------------------

def t_all_reduce(args, c):
    r, n = world(args)
    for dt in DTYPES:
        for numel in SIZES:
            name = "all_reduce %s x%d" % (dt, numel)
            x = pattern(dt, numel, r)
            dist.all_reduce(x)
            want = sum(pattern(torch.int64, numel, q) for q in range(n)).to(dt)
            c.equal(x, want, name + " SUM")

            x = torch.full((numel,), r % 2 + 1, dtype=dt)
            dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
            c.equal(x, torch.full((numel,), 2 ** (n // 2), dtype=dt), name + " PRODUCT")

            stack = torch.stack([pattern(torch.int64, numel, q) for q in range(n)])
            x = pattern(dt, numel, r)
            dist.all_reduce(x, op=dist.ReduceOp.MIN)
            c.equal(x, stack.min(0).values.to(dt), name + " MIN")
            x = pattern(dt, numel, r)
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
            c.equal(x, stack.max(0).values.to(dt), name + " MAX")

            x = torch.full((numel,), (r + 1) * n, dtype=dt)
            dist.all_reduce(x, op=dist.ReduceOp.AVG)
            c.equal(x, torch.full((numel,), n * (n + 1) // 2, dtype=dt), name + " AVG")
    for dt in FLOAT_TYPES:
        x = pattern(dt, 100, r)
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
        want = (2 * sum(pattern(torch.int64, 100, q) for q in range(n))).to(dt)
        c.equal(x, want, "all_reduce %s PREMUL_SUM(2.0)" % dt)
    # bool: MAX is "any", MIN is "all"
    x = torch.tensor([r == 0, False, True])
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    c.equal(x, torch.tensor([True, False, True]), "all_reduce bool MAX")
    x = torch.tensor([r == 0, False, True])
    dist.all_reduce(x, op=dist.ReduceOp.MIN)
    c.equal(x, torch.tensor([n == 1, False, True]), "all_reduce bool MIN")
    # complex (torch passes it as pairs of reals)
    x = torch.complex(pattern(torch.float32, 10, r), pattern(torch.float32, 10, r + 5))
    dist.all_reduce(x)
    want = torch.complex(sum(pattern(torch.float32, 10, q) for q in range(n)),
                         sum(pattern(torch.float32, 10, q + 5) for q in range(n)))
    c.equal(x, want, "all_reduce complex64 SUM")
    # large and not a multiple of anything: integers in float32, exact
    numel = (1 << 20) + 7
    g = torch.Generator().manual_seed(1000 + r)
    x = torch.randint(-1000, 1000, (numel,), generator=g).float()
    parts = [torch.randint(-1000, 1000, (numel,), generator=torch.Generator().manual_seed(1000 + q))
             for q in range(n)]
    dist.all_reduce(x)
    c.equal(x, sum(parts).float(), "all_reduce float32 x%d SUM" % numel)


def t_all_reduce_coalesced(args, c):
    r, n = world(args)
    sizes = [1, 7, 100, 3000, 5]
    xs = [pattern(torch.float32, k, r + i) for i, k in enumerate(sizes)]
    dist.all_reduce_coalesced(xs)
    for i, k in enumerate(sizes):
        want = sum(pattern(torch.float32, k, q + i) for q in range(n))
        c.equal(xs[i], want, "all_reduce_coalesced tensor %d" % i)
    xs = [torch.full((k,), float(r + 1)) for k in sizes]
    fut = dist.all_reduce_coalesced(xs, op=dist.ReduceOp.MAX, async_op=True)
    fut.wait()
    for i, k in enumerate(sizes):
        c.equal(xs[i], torch.full((k,), float(n)), "all_reduce_coalesced MAX async %d" % i)


def t_reduce(args, c):
    r, n = world(args)
    for root in range(n):
        for dt in (torch.int8, torch.int64, torch.float16, torch.bfloat16, torch.float32):
            x = pattern(dt, 50, r)
            dist.reduce(x, dst=root)
            if r == root:
                want = sum(pattern(torch.int64, 50, q) for q in range(n)).to(dt)
                c.equal(x, want, "reduce %s to %d" % (dt, root))
        x = torch.full((9,), float(r + 1))
        dist.reduce(x, dst=root, op=dist.ReduceOp.MAX)
        if r == root:
            c.equal(x, torch.full((9,), float(n)), "reduce MAX to %d" % root)


def t_reduce_scatter(args, c):
    r, n = world(args)
    for dt in DTYPES:
        for k in (1, 33):
            inputs = [pattern(dt, k, r * n + j) for j in range(n)]
            out = torch.zeros(k, dtype=dt)
            dist.reduce_scatter(out, inputs)
            want = sum(pattern(torch.int64, k, q * n + r) for q in range(n)).to(dt)
            c.equal(out, want, "reduce_scatter %s x%d" % (dt, k))
            big = torch.cat(inputs)
            out = torch.zeros(k, dtype=dt)
            dist.reduce_scatter_tensor(out, big)
            c.equal(out, want, "reduce_scatter_tensor %s x%d" % (dt, k))
    # AVG through the tensor form
    big = torch.full((4 * n,), float((r + 1) * n))
    out = torch.zeros(4)
    dist.reduce_scatter_tensor(out, big, op=dist.ReduceOp.AVG)
    c.equal(out, torch.full((4,), float(n * (n + 1) // 2)), "reduce_scatter_tensor AVG")


# ---- data movement ----------------------------------------------------------------------

def t_broadcast(args, c):
    r, n = world(args)
    for root in range(n):
        for dt in DTYPES + [torch.bool, torch.complex128]:
            want = pattern(torch.int64, 40, root)
            want = want.bool() if dt == torch.bool else want.to(dt)
            x = want.clone() if r == root else torch.zeros(40, dtype=dt)
            dist.broadcast(x, src=root)
            c.equal(x, want, "broadcast %s from %d" % (dt, root))


def t_all_gather(args, c):
    r, n = world(args)
    for dt in DTYPES:
        for k in (1, 17):
            want = [pattern(dt, k, q) for q in range(n)]
            outs = [torch.zeros(k, dtype=dt) for _ in range(n)]
            dist.all_gather(outs, pattern(dt, k, r))
            for q in range(n):
                c.equal(outs[q], want[q], "all_gather %s x%d from %d" % (dt, k, q))
            # views of one tensor (Loom receives in place), input in its own slot
            big = torch.zeros(n * k, dtype=dt)
            views = list(big.split(k))
            views[r].copy_(pattern(dt, k, r))
            dist.all_gather(views, views[r])
            c.equal(big, torch.cat(want), "all_gather %s x%d into views, in place" % (dt, k))
            out = torch.zeros(n * k, dtype=dt)
            dist.all_gather_into_tensor(out, pattern(dt, k, r))
            c.equal(out, torch.cat(want), "all_gather_into_tensor %s x%d" % (dt, k))
            out = torch.zeros(n * k, dtype=dt)
            dist._all_gather_base(out, pattern(dt, k, r))
            c.equal(out, torch.cat(want), "_all_gather_base %s x%d" % (dt, k))
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r, "text": "x" * r})
    c.true(objs == [{"rank": q, "text": "x" * q} for q in range(n)], "all_gather_object")
    # coalesced: inputs of different sizes, one empty (torch wants one
    # dtype per call); outs[q][i] receives rank q's input i
    for dt in (torch.float32, torch.bfloat16, torch.int64):
        sizes = [5, 0, 33]
        ins = [pattern(dt, k, r) for k in sizes]
        outs = [[torch.zeros(k, dtype=dt) for k in sizes] for _ in range(n)]
        dist.all_gather_coalesced(outs, ins)
        for q in range(n):
            for i, k in enumerate(sizes):
                c.equal(outs[q][i], pattern(dt, k, q),
                        "all_gather_coalesced %s input %d from %d" % (dt, i, q))


def t_gather_scatter(args, c):
    r, n = world(args)
    for root in range(n):
        for dt in (torch.uint8, torch.int32, torch.float16, torch.float64):
            lst = [torch.zeros(11, dtype=dt) for _ in range(n)] if r == root else None
            dist.gather(pattern(dt, 11, r), gather_list=lst, dst=root)
            if r == root:
                for q in range(n):
                    c.equal(lst[q], pattern(dt, 11, q), "gather %s to %d from %d" % (dt, root, q))
            lst = [pattern(dt, 11, 10 + q) for q in range(n)] if r == root else None
            out = torch.zeros(11, dtype=dt)
            dist.scatter(out, scatter_list=lst, src=root)
            c.equal(out, pattern(dt, 11, 10 + r), "scatter %s from %d" % (dt, root))
    objs = ["obj%d" % q for q in range(n)] if r == 0 else [None] * n
    dist.broadcast_object_list(objs, src=0)
    c.true(objs == ["obj%d" % q for q in range(n)], "broadcast_object_list")


def rows_to(src, dst):
    """Rows that rank src sends to rank dst in the split tests."""
    return (src + 2 * dst) % 3 + 1


def t_all_to_all(args, c):
    r, n = world(args)
    for dt in (torch.int8, torch.int64, torch.bfloat16, torch.float32):
        # equal blocks
        inp = torch.cat([torch.full((2, 3), 10 * r + j, dtype=dt) for j in range(n)])
        out = torch.zeros(2 * n, 3, dtype=dt)
        dist.all_to_all_single(out, inp)
        want = torch.cat([torch.full((2, 3), 10 * q + r, dtype=dt) for q in range(n)])
        c.equal(out, want, "all_to_all_single %s" % dt)
        # split sizes (rows along dim 0)
        in_splits = [rows_to(r, j) for j in range(n)]
        out_splits = [rows_to(q, r) for q in range(n)]
        inp = torch.cat([torch.full((in_splits[j], 3), 10 * r + j, dtype=dt) for j in range(n)])
        out = torch.zeros(sum(out_splits), 3, dtype=dt)
        dist.all_to_all_single(out, inp, output_split_sizes=out_splits,
                               input_split_sizes=in_splits)
        want = torch.cat([torch.full((out_splits[q], 3), 10 * q + r, dtype=dt)
                          for q in range(n)])
        c.equal(out, want, "all_to_all_single %s with splits" % dt)
        # list form, sizes per peer
        ins = [torch.full((rows_to(r, j),), 10 * r + j, dtype=dt) for j in range(n)]
        outs = [torch.zeros(rows_to(q, r), dtype=dt) for q in range(n)]
        dist.all_to_all(outs, ins)
        for q in range(n):
            c.equal(outs[q], torch.full((rows_to(q, r),), 10 * q + r, dtype=dt),
                    "all_to_all %s from %d" % (dt, q))


def t_send_recv(args, c):
    r, n = world(args)
    if n < 2:
        return
    nxt, prv = (r + 1) % n, (r - 1) % n
    for dt in (torch.uint8, torch.float16, torch.float64):
        out = pattern(dt, 64, r)
        got = torch.zeros(64, dtype=dt)
        if r % 2 == 0:
            dist.send(out, dst=nxt)
            dist.recv(got, src=prv)
        else:
            dist.recv(got, src=prv)
            dist.send(out, dst=nxt)
        c.equal(got, pattern(dt, 64, prv), "send/recv %s ring" % dt)
    # isend/irecv of large messages both ways: a coalesced batch cannot deadlock
    big = 1 << 20
    out = torch.full((big,), float(r))
    got = torch.zeros(big)
    ops = [dist.P2POp(dist.isend, out, nxt), dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    c.equal(got, torch.full((big,), float(prv)), "batch_isend_irecv 4 MiB ring")
    # plain isend/irecv, small
    got = torch.zeros(8, dtype=torch.int32)
    reqs = [dist.isend(torch.full((8,), r, dtype=torch.int32), nxt), dist.irecv(got, prv)]
    for w in reqs:
        w.wait()
    c.equal(got, torch.full((8,), prv, dtype=torch.int32), "isend/irecv ring")
    # from any source: rank 0 takes two messages from every other rank, in
    # whatever order they come, each sender's in its order
    if r == 0:
        seen = {}
        for _ in range(2 * (n - 1)):
            got = torch.zeros(1000)
            src = dist.recv(got)
            k = seen.get(src, 0)
            seen[src] = k + 1
            c.equal(got, torch.full((1000,), float(src * 10 + k)),
                    "recv(src=None): message %d from rank %d" % (k, src))
        c.true(sorted(seen.items()) == [(s, 2) for s in range(1, n)],
               "recv(src=None): two messages from every other rank, got %s" % seen)
        dist.barrier()  # a message of another size after it: never matched above
        got = torch.zeros(5, dtype=torch.int64)
        w = dist.irecv(got)
        w.wait()
        c.equal(got, torch.full((5,), 100 + w._source_rank(), dtype=torch.int64),
                "irecv(src=None) and its work's source rank")
    else:
        for k in range(2):
            dist.send(torch.full((1000,), float(r * 10 + k)), dst=0)
        dist.barrier()
        if r == n - 1:
            dist.send(torch.full((5,), 100 + r, dtype=torch.int64), dst=0)


def t_barrier(args, c):
    r, n = world(args)
    flag = args.store + ".barrier"
    if r == 0:
        time.sleep(0.3)
        open(flag, "w").close()
    dist.barrier()
    c.true(os.path.exists(flag), "barrier: rank 0's file exists after the barrier")
    dist.barrier()
    if r == 0:
        os.unlink(flag)


# ---- asynchrony ---------------------------------------------------------------------------

def t_async(args, c):
    r, n = world(args)
    xs = [torch.full((1000,), float(r + i)) for i in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for i, w in enumerate(works):
        w.wait()
        c.true(w.is_completed() and w.is_success(), "async all_reduce %d completed" % i)
        c.equal(xs[i], torch.full((1000,), float(sum(q + i for q in range(n)))),
                "async all_reduce %d" % i)
    x = torch.full((5,), float(r + 1))
    w = dist.all_reduce(x, async_op=True)
    fut = w.get_future().then(lambda f: f.value()[0] * 2)
    want = torch.full((5,), float(n * (n + 1) // 2))
    c.equal(fut.wait(), want * 2, "future.then on all_reduce")
    c.equal(w.get_future().value()[0], want, "future value is the reduced tensor")
    c.true(w.wait(), "wait() returns True")
    # a chain without waits between: stream order
    x = torch.ones(100)
    for _ in range(5):
        dist.all_reduce(x, async_op=True)
    dist.all_reduce(x, async_op=True).wait()
    c.equal(x, torch.full((100,), float(n ** 6)), "6 queued all_reduces run in order")


# ---- subgroups ----------------------------------------------------------------------------

def t_subgroups(args, c):
    r, n = world(args)
    pair = dist.new_group([0, 1]) if n >= 2 else None
    evens = dist.new_group([q for q in range(n) if q % 2 == 0])
    odds = dist.new_group([q for q in range(n) if q % 2 == 1]) if n >= 2 else None
    if r in (0, 1) and pair is not None:
        x = torch.full((3,), float(r + 1))
        dist.all_reduce(x, group=pair)
        c.equal(x, torch.full((3,), 3.0), "subgroup [0, 1] all_reduce")
        outs = [torch.zeros(2, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(outs, torch.full((2,), r, dtype=torch.int64), group=pair)
        c.equal(torch.stack(outs), torch.tensor([[0, 0], [1, 1]]), "subgroup all_gather")
    mine = evens if r % 2 == 0 else odds
    members = [q for q in range(n) if q % 2 == r % 2]
    x = torch.full((4,), r, dtype=torch.int32)
    dist.all_reduce(x, group=mine)
    c.equal(x, torch.full((4,), sum(members), dtype=torch.int32), "evens/odds all_reduce")
    x = torch.full((4,), r, dtype=torch.int32)
    dist.broadcast(x, src=members[-1], group=mine)
    c.equal(x, torch.full((4,), members[-1], dtype=torch.int32), "evens/odds broadcast")
    # the world group still works, and its members agree after the subgroups
    x = torch.ones(2)
    dist.all_reduce(x)
    c.equal(x, torch.full((2,), float(n)), "world all_reduce after subgroups")


# ---- against gloo --------------------------------------------------------------------------

def t_against_gloo(args, c):
    r, n = world(args)
    gloo = dist.new_group(backend="gloo")
    g = torch.Generator().manual_seed(77 + r)
    data = torch.randn(10007, generator=g)

    def both(fn, what, exact=True):
        a, b = data.clone(), data.clone()
        ra = fn(a, None)
        rb = fn(b, gloo)
        ra = a if ra is None else ra
        rb = b if rb is None else rb
        if exact:
            c.equal(ra, rb, what + " == gloo")
        else:
            c.close(ra, rb, what + " ~ gloo")

    order_free = n <= 2  # a sum or product of two is the same in any order
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT):
        both(lambda t, grp, op=op: dist.all_reduce(t, op=op, group=grp),
             "all_reduce %s" % op, exact=order_free)
    for op in (dist.ReduceOp.MIN, dist.ReduceOp.MAX):
        both(lambda t, grp, op=op: dist.all_reduce(t, op=op, group=grp), "all_reduce %s" % op)

    def reduce_to_last(t, grp):
        dist.reduce(t, dst=n - 1, group=grp)
        return t if r == n - 1 else torch.zeros(1)
    both(reduce_to_last, "reduce", exact=order_free)
    both(lambda t, grp: dist.broadcast(t, src=n - 1, group=grp), "broadcast")

    def gather_all(t, grp):
        outs = [torch.zeros_like(t) for _ in range(n)]
        dist.all_gather(outs, t, group=grp)
        return torch.cat(outs)
    both(gather_all, "all_gather")

    def gather0(t, grp):
        outs = [torch.zeros_like(t) for _ in range(n)] if r == 0 else None
        dist.gather(t, gather_list=outs, dst=0, group=grp)
        return torch.cat(outs) if r == 0 else torch.zeros(1)
    both(gather0, "gather")

    def scatter0(t, grp):
        out = torch.zeros(100)
        dist.scatter(out, scatter_list=list(t[:100 * n].split(100)) if r == 0 else None,
                     src=0, group=grp)
        return out
    both(scatter0, "scatter")

    def a2a(t, grp):
        out = torch.zeros(n * 1000)
        dist.all_to_all_single(out, t[:n * 1000].contiguous(), group=grp)
        return out
    both(a2a, "all_to_all_single")
    dist.destroy_process_group(gloo)


# ---- bad input ----------------------------------------------------------------------------

def t_bad_input(args, c):
    r, n = world(args)
    x = torch.zeros(4, 4)
    c.raises(lambda: dist.all_reduce(x.t()), "not contiguous", "non-contiguous all_reduce")
    c.raises(lambda: dist.broadcast(x[:, 1], src=0), "not contiguous", "non-contiguous broadcast")
    c.raises(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16)), "torch.int16",
             "int16 all_reduce")
    # A tensor of another device: torch's dispatcher refuses the meta device
    # before the backend sees it (the backend's own check names a CUDA
    # device, which this machine cannot make).
    c.raises(lambda: dist.all_reduce(torch.zeros(3, device="meta")), "Meta",
             "tensor on a non-CPU device")
    c.raises(lambda: dist.all_reduce(torch.zeros(3).to_sparse()), "not a dense tensor",
             "sparse all_reduce")
    c.raises(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int32), op=dist.ReduceOp.BAND),
             "BAND is not supported", "bitwise op")
    c.raises(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.bool)), "torch.bool",
             "SUM on bool")
    c.raises(lambda: dist.all_gather([torch.zeros(3)] * (n + 1), torch.zeros(3)),
             "expected %d output tensors" % n, "all_gather list of the wrong length")
    c.raises(lambda: dist.all_gather([torch.zeros(3)] * n, torch.zeros(4)),
             "has 3 elements but the tensor it pairs with has 4", "all_gather size mismatch")
    c.raises(lambda: dist.all_gather_coalesced([[torch.zeros(3)]] * (n + 1), [torch.zeros(3)]),
             "expected %d output lists" % n, "all_gather_coalesced with too many lists")
    c.raises(lambda: dist.all_gather_into_tensor(torch.zeros(3 * n + 1), torch.zeros(3)),
             "output has %d elements; it must have group size (%d) x input's 3" % (3 * n + 1, n),
             "all_gather_into_tensor size mismatch")
    c.raises(lambda: dist.reduce_scatter_tensor(torch.zeros(3), torch.zeros(3 * n + 1)),
             "input has %d elements; it must have group size (%d) x output's 3" % (3 * n + 1, n),
             "reduce_scatter_tensor size mismatch")
    c.raises(lambda: dist.reduce_scatter_tensor(torch.zeros(3), torch.zeros(3 * n).double()),
             "input and output must have one dtype", "reduce_scatter_tensor dtype mismatch")
    c.raises(lambda: dist.all_to_all_single(torch.zeros(n), torch.zeros(n),
                                            input_split_sizes=[1] * (n + 1),
                                            output_split_sizes=[1] * n),
             "split sizes for a group of", "all_to_all_single split count")
    c.raises(lambda: dist.broadcast(torch.zeros(3), src=n + 5), "is not a rank of this group",
             "broadcast from a rank outside the group")
    c.raises(lambda: dist.recv(torch.zeros(0)), "count is 0", "recv(src=None) of an empty tensor")
    # nothing above reached Loom's queue: the group is still usable
    x = torch.ones(3)
    dist.all_reduce(x)
    c.equal(x, torch.full((3,), float(n)), "all_reduce after the bad calls")


TESTS = [t_all_reduce, t_all_reduce_coalesced, t_reduce, t_reduce_scatter, t_broadcast,
         t_all_gather, t_gather_scatter, t_all_to_all, t_send_recv, t_barrier, t_async,
         t_subgroups, t_against_gloo, t_bad_input]


def main(args, c):
    harness.init(args, "loom", timeout_s=30)
    c.true(dist.get_backend() == "loom", "the default group's backend is loom")
    for test in TESTS:
        test(args, c)
    dist.destroy_process_group()


if __name__ == "__main__":
    harness.run(main)
