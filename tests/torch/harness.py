"""harness.py — runs a test script on N ranks, one process each, and the
helpers those ranks share.

A script calls run(main) at the bottom.  Started with `--launch N`, it
starts itself N times (`--rank R --nranks N --store FILE`), bounded by a
wall-clock timeout, and exits 0 only when every rank exited 0 in time;
otherwise it prints every rank's output.  Each rank ends with the line
"rank R: N checks passed", which test_torch.sh counts.
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist


class Checks:
    """Counts checks; a failed one raises at once (a rank that goes on
    after a failure would only desynchronise the collectives)."""

    def __init__(self, rank):
        self.rank = rank
        self.count = 0

    def true(self, cond, what):
        self.count += 1
        if not cond:
            raise AssertionError("rank %d: %s" % (self.rank, what))

    def equal(self, got, want, what):
        """Exact: same dtype, shape and values."""
        self.true(
            got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want),
            "%s: got %s, want %s" % (what, short(got), short(want)),
        )

    def close(self, got, want, what, rtol=1e-5, atol=1e-6):
        self.true(
            got.dtype == want.dtype and got.shape == want.shape
            and torch.allclose(got, want, rtol=rtol, atol=atol),
            "%s: got %s, want %s" % (what, short(got), short(want)),
        )

    def raises(self, fn, needle, what):
        """fn() must raise an exception whose text contains `needle`."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (any type: the text matters)
            self.true(needle in str(e), "%s: message %r lacks %r" % (what, str(e)[:400], needle))
            return str(e)
        self.true(False, "%s: no exception" % what)
        return ""


def short(t):
    flat = t.reshape(-1)
    body = flat[:8].tolist()
    return "%s%s %s" % (body, "..." if flat.numel() > 8 else "", t.dtype)


def init(args, backend="loom", timeout_s=60):
    """The default process group of this rank, on the launcher's FileStore."""
    store = dist.FileStore(args.store, args.nranks)
    dist.init_process_group(backend, store=store, rank=args.rank, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=timeout_s))


def launch(script, nranks, timeout_s, extra):
    with tempfile.TemporaryDirectory(prefix="loom-torch-") as tmp:
        store = os.path.join(tmp, "store")
        procs = []
        for r in range(nranks):
            # LOOM_TEST_WRAPPER: a command each rank runs under (valgrind)
            cmd = shlex.split(os.environ.get("LOOM_TEST_WRAPPER", "")) + [
                sys.executable, script, "--rank", str(r), "--nranks", str(nranks),
                "--store", store] + extra
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
        start = time.monotonic()
        outputs, codes, timed_out = [], [], False
        for p in procs:
            left = max(1.0, timeout_s - (time.monotonic() - start))
            try:
                out, _ = p.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                timed_out = True
                for q in procs:
                    q.kill()
                out, _ = p.communicate()
            outputs.append(out)
            codes.append(p.returncode)
        elapsed = time.monotonic() - start
    ok = not timed_out and all(c == 0 for c in codes)
    for r, out in enumerate(outputs):
        lines = [l for l in out.splitlines() if "No CUDA runtime" not in l]
        if ok:
            lines = [l for l in lines if "checks passed" in l]
        for line in lines:
            print("[%d] %s" % (r, line))
    name = os.path.basename(script)
    if timed_out:
        print("FAIL: %s on %d ranks did not finish within %d s" % (name, nranks, timeout_s))
    elif not ok:
        print("FAIL: %s on %d ranks: exit codes %s" % (name, nranks, codes))
    else:
        print("PASS: %s on %d ranks (%.1f s)" % (name, nranks, elapsed))
    return 0 if ok else 1


def run(main):
    parser = argparse.ArgumentParser()
    parser.add_argument("--launch", type=int, help="start this many ranks of the script")
    parser.add_argument("--timeout", type=int, default=120, help="seconds, with --launch")
    parser.add_argument("--rank", type=int)
    parser.add_argument("--nranks", type=int)
    parser.add_argument("--store")
    args, extra = parser.parse_known_args()
    if args.launch:
        sys.exit(launch(os.path.abspath(sys.argv[0]), args.launch, args.timeout, extra))
    args.extra = extra
    checks = Checks(args.rank)
    try:
        main(args, checks)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # at once: the peers fail fast instead of waiting for us
    print("rank %d: %d checks passed" % (args.rank, checks.count), flush=True)
