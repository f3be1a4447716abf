"""Builds pinloader._pinloader: the CPython binding (python/pinloader/_pinloader.c)
compiled together with the C library's sources (src/**/*.c), so the wheel needs
no separately installed libpinloader.

The CUDA backend is built when a toolkit is found (CUDA_HOME, CUDA_PATH or
/usr/local/cuda with include/cuda_runtime.h, a static libcudart and bin/nvcc,
which compiles the transform kernels src/backend/cuda/*.cu); it links
the static CUDA runtime, so the module runs wherever a driver exists and falls
back to the CPU without one. PINLOADER_NO_CUDA=1 forces the host-only build.

It also builds the `pinloader` command-line tool (tools/*.c over the same
library objects) into the package as pinloader/bin/pinloader; the console
script `pinloader` (pinloader/_cli.py) runs it in its own place (exec), so
that an installed `pinloader` behaves exactly as CMake's build/pinloader.
"""
import glob
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


# The library's warning flags (CMakeLists.txt's PL_WARNINGS), for the
# extension, the library and the CLI alike; warnings are errors in CI
# (CI=true), as there.
WARNINGS = ["-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes",
            "-Wno-unused-parameter"] + (["-Werror"] if os.environ.get("CI") == "true" else [])


def find_cuda():
    """(include dir, libcudart_static.a, nvcc) or None."""
    if os.environ.get("PINLOADER_NO_CUDA", "") not in ("", "0"):
        return None
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        inc = os.path.join(root, "include")
        nvcc = os.path.join(root, "bin", "nvcc")
        if not os.path.isfile(os.path.join(inc, "cuda_runtime.h")) or not os.access(nvcc, os.X_OK):
            continue
        for libdir in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            lib = os.path.join(root, libdir, "libcudart_static.a")
            if os.path.isfile(lib):
                return inc, lib, nvcc
    return None


# The CMake build's flags for the kernels (CMakeLists.txt): sm_90 machine
# code, PTX for any GPU from sm_75, no C++ runtime needed at link.
NVCC_FLAGS = ["-O3", "-std=c++17", "-gencode=arch=compute_90,code=sm_90",
              "-gencode=arch=compute_75,code=compute_75",
              "-Xcompiler=-fPIC,-fvisibility=hidden,-fno-exceptions,-fno-threadsafe-statics",
              "-DPL_STATIC_DEFINE=1", "-DPL_HAVE_CUDA=1", "-Iinclude", "-Isrc"]


class BuildExtWithKernels(build_ext):
    """build_ext that first compiles src/backend/cuda/*.cu with nvcc into
    objects the extension links (setuptools knows no CUDA)."""

    def run(self):
        cuda = find_cuda()
        if cuda:
            objdir = os.path.join(self.build_temp, "cuda")
            os.makedirs(objdir, exist_ok=True)
            for ext in self.extensions:
                ext.extra_objects[:0] = [self.nvcc(cuda[2], cu, objdir) for cu in cuda_sources()]
        super().run()

    def nvcc(self, nvcc, cu, objdir):
        obj = os.path.join(objdir, os.path.basename(cu) + ".o")
        deps = [cu] + glob.glob(os.path.join(HERE, "src", "**", "*.h"), recursive=True) \
            + glob.glob(os.path.join(HERE, "include", "**", "*.h"), recursive=True)
        if self.force or not os.path.exists(obj) or \
                os.path.getmtime(obj) < max(os.path.getmtime(d) for d in deps):
            cmd = [nvcc] + NVCC_FLAGS + ["-c", cu, "-o", obj]
            print(" ".join(cmd))
            subprocess.check_call(cmd, cwd=HERE)
        return obj


def cuda_sources():
    return sorted(glob.glob(os.path.join(HERE, "src", "backend", "cuda", "*.cu")))


def library_sources(cuda):
    """The same rule as CMakeLists.txt: every .c under src/, except that
    src/backend/cuda/ is compiled only with CUDA and src/backend/no_cuda.c
    only without. Paths relative to setup.py, as setuptools wants."""
    srcs = sorted(os.path.relpath(p, HERE)
                  for p in glob.glob(os.path.join(HERE, "src", "**", "*.c"), recursive=True))
    cuda_dir = os.path.join("src", "backend", "cuda") + os.sep
    stub = os.path.join("src", "backend", "no_cuda.c")
    if cuda:
        return [s for s in srcs if s != stub]
    return [s for s in srcs if not s.startswith(cuda_dir)]


def codec_archives(build_dir):
    """Debian's libjpeg.a and libpng16.a, linked into the module so that it
    runs where the packages are missing (see CMakeLists.txt: each archive's
    one reference to glibc's stderr is renamed to pinloader's hidden
    pl_codec_stderr in a copy). A bundle of the same headers and archives
    (scripts/codecs-bundle.sh: PL_CODECS_DIR, else .data/codecs) is looked
    at first: the GPU box has no -dev packages. [(macro, archive, include
    dir)] for those found."""
    import shutil
    import subprocess

    bundle = os.environ.get("PL_CODECS_DIR") or os.path.join(HERE, ".data", "codecs")
    incs = [os.path.join(bundle, "include"), "/usr/include"]
    libdirs = [os.path.join(bundle, "lib"), "/usr/lib/x86_64-linux-gnu",
               "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
    found = []
    objcopy = shutil.which("objcopy")
    for macro, header, names in (("PL_HAVE_JPEG", "jpeglib.h", ("libjpeg.a",)),
                                 ("PL_HAVE_PNG", "png.h", ("libpng16.a", "libpng.a"))):
        inc = next((i for i in incs if os.path.isfile(os.path.join(i, header))), None)
        if inc is None:
            continue
        for d in libdirs:
            lib = next((os.path.join(d, n) for n in names if os.path.isfile(os.path.join(d, n))), None)
            if lib and objcopy:
                os.makedirs(build_dir, exist_ok=True)
                out = os.path.join(build_dir, os.path.basename(lib))
                subprocess.check_call([objcopy, "--redefine-sym", "stderr=pl_codec_stderr", lib, out])
                found.append((macro, out, inc))
                break
    return found


def extension():
    cuda = find_cuda()
    # The extension is every .c of python/pinloader/ (python/pinloader/module.h).
    ext = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "python", "pinloader", "*.c")))
    sources = ext + library_sources(cuda is not None)
    include_dirs = ["include", "src", "python/pinloader"]
    # gnu-flavoured C11 as the CMake build (pthreads, mmap, clock_gettime);
    # the library's symbols stay inside the module (PL_STATIC_DEFINE + hidden).
    cflags = ["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden", "-O2"] + WARNINGS
    macros = [("PL_STATIC_DEFINE", "1")]
    libraries = ["z", "m", "pthread"]
    extra_objects = []
    link_args = ["-Wl,--exclude-libs,libjpeg.a:libpng16.a:libpng.a"]
    for macro, archive, inc in codec_archives(os.path.join(HERE, "build-python", "codecs")):
        macros.append((macro, "1"))
        extra_objects.append(archive)
        if inc != "/usr/include" and inc not in include_dirs:
            include_dirs.append(inc)
    if cuda:
        inc, lib, _ = cuda
        include_dirs.append(inc)
        macros.append(("PL_HAVE_CUDA", "1"))
        extra_objects.append(lib)
        libraries += ["dl", "rt"]
    return Extension(
        "pinloader._pinloader",
        sources=sources,
        include_dirs=include_dirs,
        define_macros=macros,
        extra_compile_args=cflags,
        libraries=libraries,
        extra_objects=extra_objects,
        extra_link_args=link_args,
        depends=glob.glob(os.path.join(HERE, "include", "**", "*.h"), recursive=True)
        + glob.glob(os.path.join(HERE, "src", "**", "*.h"), recursive=True)
        + glob.glob(os.path.join(HERE, "python", "pinloader", "*.h")),
    )


class build_ext_and_cli(BuildExtWithKernels):
    """The kernels and the extension, then the CLI executable next to it (pinloader/bin/)."""

    def run(self):
        super().run()
        ext = self.extensions[0]
        tools = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "tools", "*.c")))
        lib = [s for s in ext.sources if s.startswith("src" + os.sep)]
        # The library objects are the extension's own, already compiled
        # (compile() skips objects newer than their sources and depends).
        objects = self.compiler.compile(
            tools + lib, output_dir=self.build_temp, macros=ext.define_macros,
            include_dirs=ext.include_dirs + ["tools"], extra_postargs=ext.extra_compile_args,
            depends=ext.depends)
        bindir = os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), "bin")
        os.makedirs(bindir, exist_ok=True)
        self.compiler.link_executable(
            objects + ext.extra_objects, "pinloader", output_dir=bindir,
            libraries=ext.libraries)


def check_wheel_support():
    """pip builds a wheel (setup.py dist_info, bdist_wheel), which needs the `wheel`
    package or setuptools >= 70.1. Without build isolation nothing brings
    it, and setuptools says only "invalid command 'bdist_wheel'": name the
    interpreter and the two ways out instead."""
    if not {"bdist_wheel", "dist_info"} & set(sys.argv):
        return
    try:
        import wheel  # noqa: F401
        return
    except ImportError:
        pass
    try:
        import setuptools.command.bdist_wheel  # noqa: F401
        return
    except ImportError:
        pass
    sys.exit("pinloader: %s (Python %s) cannot build a wheel: it has neither the 'wheel' package "
             "nor setuptools >= 70.1. Install with build isolation (`pip install .`, which fetches "
             "setuptools and wheel from PyPI), or add them: `%s -m pip install wheel`."
             % (sys.executable, sys.version.split()[0], sys.executable))


check_wheel_support()
setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": build_ext_and_cli},
    # Out of CMake's build/: the Python build lives in build-python/ (a
    # host-only one in build-python-nocuda/, so neither reuses the other's
    # objects).
    options={"build": {"build_base": "build-python" if find_cuda() else "build-python-nocuda"}},
)
