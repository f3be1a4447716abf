"""What every benchmark result records (GUIDE.md: machine, date, commit and
the torch peer measured in the same run), and how it is written: NAME.json
and NAME.md (a markdown table) into the output folder.

    import benchinfo
    info = benchinfo.collect(device)         # machine, date, commit, versions
    benchinfo.write(out, "images", info, res, rows, notes)

The output folder is --out, else $PL_GPU_LOGS (set by scripts/gpu-check.sh),
else the current directory.
"""
import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def commit():
    """PL_COMMIT (the device call's tree has no .git of its own), else git."""
    if os.environ.get("PL_COMMIT"):
        return os.environ["PL_COMMIT"]
    try:
        return subprocess.check_output(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                                       stderr=subprocess.DEVNULL, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cores():
    """Cores this process may run on (a container's limit, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def versions():
    out = {"python": platform.python_version()}
    for mod in ("torch", "torchvision", "numpy", "PIL"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # missing, or broken: recorded as absent
            out[mod] = None
    return out


def collect(device):
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit(), "host": platform.node(), "cpu": cpu_model(), "cores": cores(),
            "device": device}
    info.update(versions())
    if device.startswith("cuda"):
        import torch
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def out_dir(given):
    d = given or os.environ.get("PL_GPU_LOGS") or "."
    os.makedirs(d, exist_ok=True)
    return d


def _fmt(v):
    if isinstance(v, float):
        return "{:,.0f}".format(v) if abs(v) >= 100 else "{:.3g}".format(v)
    return "" if v is None else str(v)


def write(out, name, info, res, header, rows, notes=(), quiet=False):
    """NAME.json ({"info", "results"}) and NAME.md (info line, table, notes).
    quiet: nothing printed (a bench that rewrites them after each row, so
    that a run stopped part-way leaves what it measured)."""
    d = out_dir(out)
    with open(os.path.join(d, name + ".json"), "w") as f:
        json.dump({"info": info, "results": res}, f, indent=1)
    machine = "%s, %s cores%s" % (info["cpu"], info["cores"],
                                  ", " + info["gpu"] if info.get("gpu") else "")
    peers = ", ".join("%s %s" % (k, info[k]) for k in ("torch", "torchvision", "PIL", "numpy")
                      if info.get(k))
    lines = ["# %s" % name, "",
             "Machine: %s (host %s). Date %s, commit %s. Python %s; %s." % (
                 machine, info["host"], info["date"], info["commit"], info["python"], peers),
             "Command: `%s`" % " ".join([os.path.basename(sys.executable)] + sys.argv), "",
             "| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    lines += [""] + list(notes)
    with open(os.path.join(d, name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if quiet:
        return
    print("\n".join(lines))
    print("wrote %s.json and %s.md in %s" % (name, name, d))
