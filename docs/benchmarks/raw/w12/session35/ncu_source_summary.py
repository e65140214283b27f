"""Summarise `ncu -i REP --page source --csv --print-source sass` output: one kernel's top
stall-sample instructions, its executed-instruction mix by opcode and its loads with excess
sectors.   usage: python3 ncu_source_summary.py source.csv KERNEL_INDEX TOP_N"""
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
kernels = []
cur = None
for r in rows:
    if r and r[0] == "Kernel Name":
        cur = {"name": r[1], "rows": []}; kernels.append(cur); hdr = None; continue
    if r and r[0] == "Address":
        cur["hdr"] = r; continue
    if cur is not None and r and "hdr" in cur:
        cur["rows"].append(dict(zip(cur["hdr"], r)))
k = kernels[int(sys.argv[2])]
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
tot = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in k["rows"])
print(k["name"], len(k["rows"]), "instr, samples", tot)
top = sorted(k["rows"], key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:int(sys.argv[3])]
for r in top:
    print(f'{r["Address"]:>6} {num(r["Warp Stall Sampling (All Samples)"])/tot*100:5.1f}% lsb={num(r["stall_long_sb"]):6.0f} ex={num(r["Instructions Executed"]):8.0f} xs={num(r["L2 Theoretical Sectors Global Excessive"]):8.0f} {r["Source"][:90]}')
# instruction mix in loop: executed counts by opcode
mix = collections.Counter()
for r in k["rows"]:
    op = r["Source"].split()[0] if r["Source"] else "?"
    if op.startswith("@"): op = r["Source"].split()[1]
    mix[op.split(".")[0]] += num(r["Instructions Executed"])
print(sorted(mix.items(), key=lambda t: -t[1])[:25])
xs = [(num(r["L2 Theoretical Sectors Global Excessive"]), r["Source"][:80], num(r["Instructions Executed"])) for r in k["rows"] if num(r["L2 Theoretical Sectors Global Excessive"])>0]
xs.sort(reverse=True); print("excessive:", xs[:8])
