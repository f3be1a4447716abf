"""The `pinloader` command installed by pip: the package carries the C
command-line tool (tools/*.c, built by setup.py into pinloader/bin/), and
this runs it in the Python process's place (exec), so that it behaves exactly
as CMake's build/pinloader: the same output, exit status, signals (Ctrl-C)
and terminal detection."""
import os
import sys


def executable():
    """Path of the carried CLI."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "pinloader")


def main():
    exe = executable()
    if not os.access(exe, os.X_OK):
        sys.stderr.write("pinloader: this installation lacks its command-line tool (%s): "
                         "reinstall the package\n" % exe)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
