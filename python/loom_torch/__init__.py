"""Loom's torch.distributed backend.

``import loom_torch`` registers the backend ``"loom"``; then

    torch.distributed.init_process_group("loom", ...)

works as with "gloo": the same store, rank, world size and timeout, the same
collectives, DDP unchanged.  See docs/torch.md.
"""

import atexit
import inspect

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["ProcessGroupLoom", "BACKEND_NAME", "loom_version"]

BACKEND_NAME = "loom"
ProcessGroupLoom = _C.ProcessGroupLoom
loom_version = _C.loom_version


def _create_process_group(store, rank, world_size, timeout):
    """torch's creator function: called by init_process_group and new_group
    on every member of the group."""
    return _C.ProcessGroupLoom(store, rank, world_size, timeout)


def _register():
    if hasattr(dist.Backend, BACKEND_NAME.upper()):
        return  # already registered (the module was imported again)
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:  # PyTorch 2.x: say which devices the backend serves
        dist.Backend.register_backend(BACKEND_NAME, _create_process_group, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND_NAME, _create_process_group)


_register()
# Work still queued at exit completes before the interpreter shuts down
# (bounded: a stuck peer does not hold the exit), so that no Loom thread
# touches Python objects during finalization.
atexit.register(_C._drain_at_exit, 5.0)
