"""pinloader alone on bench/python_workers.py's aug (and the seeds' dataset
with ToTensor at batch 256), one loader: samples/s best of 3 epochs, workers
busy. Run with PYTHONPATH set to the build to time. argv: workers part"""
import json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import python_workers as pw
w, part = int(sys.argv[1]), sys.argv[2]
ds = pw.NumpyAug(n=50000)
r = pw.best_rate(lambda: pw.pl_loader(ds, 256, w), 3)
print(json.dumps({"pinloader": pw.pinloader.__file__, "workers": w, "part": part,
                  "samples_per_s": round(r["samples_per_s"]), "busy": round(r["worker_busy"], 3)}), flush=True)
