import re, sys, collections
rows=[]; cur=None; mpc=''
for line in open(sys.argv[1]):
    m=re.match(r"== (\w+) pair (\d+) (\S+) load (\S+)", line)
    if m: cur=m.groups(); continue
    m=re.search(r"msgs/commit ([\d.]+)\s+cpu us/msg ([\d.]+)", line)
    if m: mpc=m.group(1); continue
    m=re.match(r"\s+(receive-\w+)\s+(\w+)\s+(\d+) clients:\s+(\d+) msg/s.*server CPU ([\d.]+) µs/call", line)
    if m:
        sc,loop,cl,rate,cpu=m.groups()
        rows.append((cur[0],cur[1],cur[2]+" load "+cur[3],cur[3],sc,loop,int(cl),int(rate),float(cpu)*2,mpc if 'recoverable' in sc else ''))
d=collections.defaultdict(dict)
for r in rows: d[(r[1],r[5],r[6])][(r[0],r[4])]=r
print("| pair | loop | clients | base: recoverable / express CPU µs per msg (express÷recoverable), msgs/commit, rate ratio | new: same |")
print("|---|---|---|---|---|")
for k in sorted(d):
    v=d[k]
    def f(who):
        r=v.get((who,'receive-recoverable')); e=v.get((who,'receive-express'))
        if not r or not e: return "-"
        return f"{r[8]:.0f} / {e[8]:.0f} ({e[8]/r[8]:.2f}), {r[9]}/commit, {r[7]:,}/{e[7]:,} msg/s ({r[7]/e[7]:.2f}) [{r[2]}]"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {f('base')} | {f('new')} |")
