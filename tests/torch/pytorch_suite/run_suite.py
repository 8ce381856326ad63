"""PyTorch's own distributed test suite (torch 1.13's
torch.testing._internal.distributed.distributed_test, the tests that
test/distributed/test_distributed_spawn.py runs) against the "loom"
backend: each test spawns WORLD_SIZE processes that init a process group
with backend "loom" and run it.  tests/torch/run_pytorch_suite.sh sets the
environment (BACKEND, WORLD_SIZE, TEMP_DIR) and reads the result.

"loom" is added to the suite's set of third-party ("plugin") backends, the
hook torch provides for them; nothing else of the suite is changed."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expecttest


def _import_shard_under_python311():
    """Debian's torch 1.13 cannot import torch.distributed._shard under
    Python 3.11: a dataclass there has a mutable default (an unhashable
    dataclass instance), which 3.11 refuses; DDP imports it, so every DDP
    test fails for every backend, gloo included.  Torch 2.0 fixed it.  Here
    the dataclasses of that package are made hashable while it is
    imported, so those tests run; nothing else changes."""
    import dataclasses

    plain = dataclasses.dataclass

    def hashable_in_shard(cls=None, /, **kw):
        def wrap(c):
            if c.__module__.startswith("torch.distributed._shard") and "unsafe_hash" not in kw \
                    and not kw.get("frozen") and "__hash__" not in c.__dict__:
                return plain(c, **dict(kw, unsafe_hash=True))
            return plain(c, **kw)
        return wrap if cls is None else wrap(cls)

    dataclasses.dataclass = hashable_in_shard
    try:
        import torch.distributed._shard.sharded_tensor  # noqa: F401
    finally:
        dataclasses.dataclass = plain


if sys.version_info >= (3, 11):
    _import_shard_under_python311()

import loom_torch  # noqa: F401  registers the "loom" backend (also in spawned children)
from torch.testing._internal.common_distributed import DistTestCases
from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed.distributed_test import (
    DistributedTest,
    TestDistBackend,
)

DistTestCases.backend_feature["plugin"].add("loom")


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
