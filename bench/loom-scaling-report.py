#!/usr/bin/python3
"""loom-scaling-report.py -- the tables of loom-scaling (docs/scaling.md).

loom-scaling runs the benchmarks and writes a manifest, one run a line:

    nranks <TAB> nodes <TAB> status <TAB> output file <TAB> JSON file

This reads each run's results (the JSON file when the program wrote one,
else loom-perf's text table as loomrun prints it, "[0] " first) and prints
the scaling tables; --json writes them as JSON too.  Exit status 0 when
every run succeeded with no wrong element, 1 otherwise, 2 on a usage error.
"""
import argparse
import json
import os
import sys

# nccl-tests' bus factors, and the collectives whose size is split over the
# ranks (loom-perf's count = size / nranks / element size).
PER_RANK = {"allgather", "reducescatter", "alltoall", "gather", "scatter"}


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in PER_RANK:
        return (n - 1) / n
    return 1.0


def num(text):
    """A float from a table cell; None for N/A."""
    try:
        return float(text)
    except ValueError:
        return None


# ---- loom-perf -------------------------------------------------------------------

def perf_from_text(path, nranks):
    """loom-perf's rows printed by rank 0: size count type redop | time algbw
    busbw #wrong | time algbw busbw #wrong (N/A where there is no in-place)."""
    coll, rows = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("[0] "):
                continue
            fields = line[4:].split()
            if line.startswith("[0] # loom-perf: "):
                coll = line[len("[0] # loom-perf: "):].split(",")[0].strip()
            elif len(fields) == 12 and fields[0].isdigit():
                def side(cells):
                    if cells[0] == "N/A":
                        return None
                    return {"time_us": num(cells[0]), "busbw_gbs": None,
                            "wrong": int(cells[3]) if cells[3].isdigit() else None}
                rows.append({"bytes": int(fields[0]), "count": int(fields[1]),
                             "oop": side(fields[4:8]), "ip": side(fields[8:12])})
    if coll is None:
        return None
    # busbw from size and time: the table rounds it to 0.01 GB/s, which is
    # all of it at small sizes.
    for r in rows:
        for side in (r["oop"], r["ip"]):
            if side and side["time_us"] and r["bytes"] > 0:
                side["busbw_gbs"] = r["bytes"] / (side["time_us"] * 1e3) * bus_factor(coll, nranks)
    return {"collective": coll, "rows": rows}


def perf_results(out, js, nranks):
    if js and os.path.exists(js):
        with open(js) as f:
            data = json.load(f)
        return {"collective": data["collective"], "rows": data["rows"]}
    return perf_from_text(out, nranks)


def per_rank_bytes(coll, size, n):
    return size // n if coll in PER_RANK else size


def pct(x):
    return "N/A" if x is None else "%.1f%%" % (100 * x)


def ratio(a, b):
    return a / b if a is not None and b else None


def perf_report(runs, ref_key, opts):
    """Prints the per-scale and per-size tables; returns (json, ok)."""
    ok = True
    for run in runs:
        run["res"] = None
        if run["status"] == 0 or os.path.exists(run["out"]):
            try:
                run["res"] = perf_results(run["out"], run["json"], run["nranks"])
            except (OSError, ValueError, KeyError) as e:
                print("loom-scaling: %dx%d: cannot read its results: %s" %
                      (run["nranks"], run["nodes"], e), file=sys.stderr)
        if run["status"] != 0 or not run["res"] or not run["res"]["rows"]:
            ok = False
    good = [r for r in runs if r["res"] and r["res"]["rows"]]
    coll = good[0]["res"]["collective"] if good else "?"
    ref = next((r for r in good if (r["nranks"], r["nodes"]) == ref_key), None)
    if ref is None and good:
        ref = good[0]
    ref_rows = {}
    if ref:
        for row in ref["res"]["rows"]:
            ref_rows[row["bytes"]] = row
        ref_by_rank_bytes = {per_rank_bytes(coll, row["bytes"], ref["nranks"]): row
                             for row in ref["res"]["rows"]}

    scales = []
    for run in runs:
        s = {"nranks": run["nranks"], "nodes": run["nodes"],
             "ranks_per_node": run["nranks"] // run["nodes"], "status": run["status"],
             "wrong": None, "rows": [], "avg_busbw_gbs": None, "efficiency": None}
        if run["res"]:
            wrong = 0
            bw, bw_ref = [], []
            for row in run["res"]["rows"]:
                o = row.get("oop") or {}
                for side in (row.get("oop"), row.get("ip")):
                    if side and side.get("wrong") is not None:
                        wrong += int(side["wrong"])
                prb = per_rank_bytes(coll, row["bytes"], run["nranks"])
                same = ref_rows.get(row["bytes"]) if ref else None
                same_work = ref_by_rank_bytes.get(prb) if ref else None
                busbw = o.get("busbw_gbs")
                ref_bw = (same or {}).get("oop", {}) or {}
                ref_t = (same_work or {}).get("oop", {}) or {}
                eff = ratio(busbw, ref_bw.get("busbw_gbs"))
                teff = ratio(ref_t.get("time_us"), o.get("time_us"))
                s["rows"].append({"bytes": row["bytes"], "per_rank_bytes": prb,
                                  "time_us": o.get("time_us"), "busbw_gbs": busbw,
                                  "efficiency": eff, "time_efficiency": teff,
                                  "wrong": o.get("wrong")})
                if busbw is not None and ref_bw.get("busbw_gbs"):
                    bw.append(busbw)
                    bw_ref.append(ref_bw["busbw_gbs"])
            s["wrong"] = wrong
            if wrong:
                ok = False
            if bw:
                s["avg_busbw_gbs"] = sum(bw) / len(bw)
                s["efficiency"] = ratio(sum(bw), sum(bw_ref))
        scales.append(s)

    print("# loom-scaling: %s; nodes via %s; %d cores here" % (coll, opts.via, opts.cores))
    print("# loom-perf %s" % opts.args)
    if ref:
        print("# reference scale: %d ranks x %d node(s)" % (ref["nranks"], ref["nodes"]))
    print("# busbw: out of place, GB/s; eff = busbw / busbw of the reference at the same "
          "size (100% = ideal);")
    print("# time-eff = time of the reference / time, at the same bytes per rank (fixed "
          "per-rank work)")
    print("#")
    print("# %5s %5s %8s %8s %11s %8s %12s %8s %9s %6s  %s" %
          ("ranks", "nodes", "rk/node", "sizes", "avg busbw", "eff",
           "busbw@max", "eff@max", "time-eff", "#wrong", "status"))
    for s in scales:
        last = s["rows"][-1] if s["rows"] else {}
        status = "ok" if s["status"] == 0 else \
            ("timeout" if s["status"] == 124 else "FAILED (status %d)" % s["status"])
        print("  %5d %5d %8d %8d %11s %8s %12s %8s %9s %6s  %s" % (
            s["nranks"], s["nodes"], s["ranks_per_node"], len(s["rows"]),
            "N/A" if s["avg_busbw_gbs"] is None else "%.4f" % s["avg_busbw_gbs"],
            pct(s["efficiency"]),
            "N/A" if last.get("busbw_gbs") is None else "%.4f" % last["busbw_gbs"],
            pct(last.get("efficiency")), pct(last.get("time_efficiency")),
            "N/A" if s["wrong"] is None else s["wrong"], status))
    sizes = sorted({row["bytes"] for s in scales for row in s["rows"]})
    heads = "".join("%18s" % ("%dx%d" % (s["nranks"], s["nodes"])) for s in scales)
    for title, value, fmt, eff in (
            ("busbw GB/s (eff)", "busbw_gbs", "%.4f", "efficiency"),
            ("time us (time-eff)", "time_us", "%.1f", "time_efficiency")):
        if not sizes:
            break
        print("#")
        print("# per size, ranks x nodes: %s" % title)
        print("# %11s%s" % ("size (B)", heads))
        for b in sizes:
            cells = ""
            for s in scales:
                row = next((r for r in s["rows"] if r["bytes"] == b), None)
                if row is None:
                    cells += "%18s" % "-"
                else:
                    v = "N/A" if row[value] is None else fmt % row[value]
                    cells += "%18s" % ("%s (%s)" % (v, pct(row[eff])))
            print("  %11d%s" % (b, cells))
    doc = {"tool": "loom-scaling", "mode": "perf", "collective": coll, "nodes_via": opts.via,
           "cores": opts.cores, "perf_args": opts.args,
           "reference": {"nranks": ref["nranks"], "nodes": ref["nodes"]} if ref else None,
           "scales": scales}
    return doc, ok


# ---- loom-ddp --------------------------------------------------------------------

def ddp_report(runs, opts):
    ok = True
    scales = []
    ref = None
    for run in runs:
        data = None
        if run["json"] and os.path.exists(run["json"]):
            try:
                with open(run["json"]) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                print("loom-scaling: %dx%d: cannot read %s: %s" %
                      (run["nranks"], run["nodes"], run["json"], e), file=sys.stderr)
        if run["status"] != 0 or data is None or data.get("wrong") != 0:
            ok = False
        s = {"nranks": run["nranks"], "nodes": run["nodes"], "status": run["status"],
             "steps_per_s": None, "samples_per_s": None, "efficiency": None,
             "compute_only_steps_per_s": None, "compute_efficiency": None,
             "overlap": None, "wait_ms": None, "wrong": None}
        if data:
            s.update(steps_per_s=data["ddp"]["steps_per_s"],
                     samples_per_s=data["ddp"]["samples_per_s"],
                     compute_only_steps_per_s=data["compute_only"]["steps_per_s"],
                     wait_ms=data["ddp"]["wait_ms"], wrong=data["wrong"],
                     overlap=ratio(data["ddp"]["steps_per_s"],
                                   data["compute_only"]["steps_per_s"]))
            if run["nranks"] == 1 and run["nodes"] == 1 and ref is None:
                ref = s
        scales.append(s)
    for s in scales:
        if ref and s["samples_per_s"] is not None:
            s["efficiency"] = ratio(s["samples_per_s"], s["nranks"] * ref["samples_per_s"])
            s["compute_efficiency"] = ratio(s["compute_only_steps_per_s"],
                                            ref["compute_only_steps_per_s"])
    print("# loom-scaling --ddp: loom-ddp %s; nodes via %s; %d cores here" %
          (opts.args or "(its defaults)", opts.via, opts.cores))
    print("# eff = samples/s / (ranks x samples/s of 1 rank); compute eff = the same "
          "steps without")
    print("# communication, against 1 rank's (what the CPU alone allows: below 100% when "
          "ranks")
    print("# outnumber cores); overlap = ddp steps/s / compute-only steps/s; wait = ms per "
          "step spent")
    print("# waiting for the all-reduces after the backward pass")
    print("#")
    print("# %5s %5s %9s %10s %8s %15s %12s %8s %8s %6s  %s" %
          ("ranks", "nodes", "steps/s", "samples/s", "eff", "compute steps/s",
           "compute eff", "overlap", "wait ms", "#wrong", "status"))
    for s in scales:
        def f(x, fmt):
            return "N/A" if x is None else fmt % x
        status = "ok" if s["status"] == 0 else \
            ("timeout" if s["status"] == 124 else "FAILED (status %d)" % s["status"])
        print("  %5d %5d %9s %10s %8s %15s %12s %8s %8s %6s  %s" % (
            s["nranks"], s["nodes"], f(s["steps_per_s"], "%.3f"),
            f(s["samples_per_s"], "%.1f"), pct(s["efficiency"]),
            f(s["compute_only_steps_per_s"], "%.3f"), pct(s["compute_efficiency"]),
            pct(s["overlap"]), f(s["wait_ms"], "%.2f"), f(s["wrong"], "%d"), status))
    doc = {"tool": "loom-scaling", "mode": "ddp", "nodes_via": opts.via, "cores": opts.cores,
           "ddp_args": opts.args, "scales": scales}
    return doc, ok


def main():
    p = argparse.ArgumentParser(description="loom-scaling's tables (docs/scaling.md)")
    p.add_argument("--mode", choices=["perf", "ddp"], required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--ref", default="", help="reference scale RANKSxNODES (perf mode)")
    p.add_argument("--via", default="?")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--args", default="")
    p.add_argument("--json")
    opts = p.parse_args()
    runs = []
    with open(opts.manifest) as f:
        for line in f:
            n, k, status, out, js = line.rstrip("\n").split("\t")
            runs.append({"nranks": int(n), "nodes": int(k), "status": int(status),
                         "out": out, "json": js})
    if not runs:
        print("loom-scaling: no run to report", file=sys.stderr)
        return 1
    if opts.mode == "perf":
        ref_key = (runs[0]["nranks"], runs[0]["nodes"])
        if opts.ref:
            try:
                r, k = opts.ref.lower().split("x")
                ref_key = (int(r), int(k))
            except ValueError:
                print("loom-scaling: --ref takes RANKSxNODES, e.g. 2x1, not '%s'" % opts.ref,
                      file=sys.stderr)
                return 2
        doc, ok = perf_report(runs, ref_key, opts)
    else:
        doc, ok = ddp_report(runs, opts)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
