"""Builds the snug package against the installed library: `make install`, then `pip install ./python` (or `make
python`). The C extension snug._snug is compiled from src/*.c and linked to libsnug.so found through pkg-config
(snug.pc records the library's folder as the run path, so no LD_LIBRARY_PATH is needed); PKG_CONFIG_PATH finds a
library installed under another prefix. Needs Python's headers and numpy (Debian: python3-dev, python3-numpy)."""

import glob
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "snug"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("snug: pkg-config does not find the installed library (module 'snug'): run `make install` first "
                 "(PREFIX=/usr/local by default), or set PKG_CONFIG_PATH to the prefix's lib/pkgconfig. "
                 f"({e})")
    return shlex.split(out)


def version():
    out = pkg_config("--modversion")
    return out[0] if out else "0"


flags = pkg_config("--cflags", "--libs")
extension = Extension(
    "snug._snug",
    sources=sorted(glob.glob(os.path.join("src", "*.c"))),
    include_dirs=[f[2:] for f in flags if f.startswith("-I")],
    library_dirs=[f[2:] for f in flags if f.startswith("-L")],
    libraries=[f[2:] for f in flags if f.startswith("-l")],
    extra_link_args=[f for f in flags if f.startswith("-Wl,")],
    extra_compile_args=["-std=c11", "-Wall", "-fvisibility=hidden"],
)

os.chdir(HERE)
setup(
    name="snug",
    version=version(),
    description="Deep-learning training inside a memory budget: Python bindings of the snug library",
    packages=["snug"],
    package_data={"snug": ["*.pyi", "py.typed"]},
    ext_modules=[extension],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
