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

__all__ = ["ProcessGroupLoom", "BACKEND_NAME", "loom_version", "shrink", "dump"]

BACKEND_NAME = "loom"
ProcessGroupLoom = _C.ProcessGroupLoom
loom_version = _C.loom_version


def shrink(exclude_ranks, group=None, abort=True):
    """After a rank died: a process group of ``group``'s ranks (default: the
    world) without ``exclude_ranks`` (ranks of ``group``), in order, made
    without the store (loomCommShrink).  Every surviving rank calls it with
    the same list; an excluded rank that calls gets None.  ``abort=True``
    first revokes ``group``, so work stuck on the dead rank ends at once.
    Use the new group with ``group=`` (or its methods); ``group`` is left
    for destruction.  See docs/torch.md."""
    return _backend(group).shrink([int(r) for r in exclude_ranks], abort)


def _backend(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupLoom):  # PyTorch 2.x wraps the backend
        pg = pg._get_backend(torch.device("cpu"))
    return pg


def dump(path=None, group=None):
    """Writes ``group``'s (default: the world's) flight recorder as JSON to
    ``path``, or with None into LOOM_TRACE_DUMP_DIR as
    loom-trace.<comm>.<rank>.json, for ``loom-trace DIR`` (loomCommDump;
    any thread, also while operations run).  See docs/debugging.md."""
    _backend(group).dump(path or "")


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
