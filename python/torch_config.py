"""Build settings of the loom_torch extension, for configure.

Run with the Python that will import the extension (/usr/bin/python3):

    torch_config.py cppflags      compiler flags: torch's and Python's headers
    torch_config.py libs          linker flags: torch's libraries
    torch_config.py ext-suffix    the extension-module suffix (EXT_SUFFIX)
    torch_config.py pythondir P   where to install packages for prefix P,
                                  relative to P, and "yes" or "no": whether
                                  this Python searches that directory

Flags come from torch.utils.cpp_extension, as torch's own extension builds
use them.  Headers go in with -isystem so that -Werror applies to Loom's
code only; the compiler's default directories are left out (naming them
with -isystem would reorder the C++ library's #include_next chain).
"""

import os
import site
import sys
import sysconfig

DEFAULT_DIRS = {"/usr/include", "/usr/local/include"}


def include_dirs():
    from torch.utils import cpp_extension

    dirs = [d for d in cpp_extension.include_paths() if os.path.isdir(d)]
    dirs.append(sysconfig.get_paths()["include"])
    try:
        import pybind11  # pip's pybind11; Debian's pybind11-dev is in /usr/include

        dirs.append(pybind11.get_include())
    except ImportError:
        pass
    seen, kept = set(), []
    for d in dirs:
        real = os.path.realpath(d)
        if real in DEFAULT_DIRS or real in seen:
            continue
        seen.add(real)
        kept.append(d)
    return kept


def cppflags():
    import torch

    flags = ["-isystem " + d for d in include_dirs()]
    flags.append("-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
    return " ".join(flags)


def libs():
    from torch.utils import cpp_extension

    flags = []
    for d in cpp_extension.library_paths():
        if os.path.isdir(d):
            flags += ["-L" + d, "-Wl,-rpath," + d]
    flags += ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    return " ".join(flags)


def pythondir(prefix):
    """The package directory under `prefix` that this Python searches."""
    version = "python%d.%d" % sys.version_info[:2]
    searched = {os.path.normpath(p) for p in site.getsitepackages() + sys.path if p}
    candidates = [
        "lib/python3/dist-packages",  # Debian's system directory (prefix /usr)
        "lib/%s/dist-packages" % version,  # Debian's local one (prefix /usr/local)
        "lib/%s/site-packages" % version,  # upstream Python's
    ]
    for rel in candidates:
        if os.path.normpath(os.path.join(prefix, rel)) in searched:
            return rel, "yes"
    return candidates[-1], "no"


def main(argv):
    if len(argv) >= 2 and argv[1] == "cppflags":
        print(cppflags())
    elif len(argv) >= 2 and argv[1] == "libs":
        print(libs())
    elif len(argv) >= 2 and argv[1] == "ext-suffix":
        print(sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    elif len(argv) == 3 and argv[1] == "pythondir":
        print(*pythondir(argv[2]))
    else:
        sys.stderr.write("usage: torch_config.py cppflags|libs|ext-suffix|pythondir PREFIX\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
