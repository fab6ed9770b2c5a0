"""Run bench.py's receive scenarios from tree $H2ROOT, adding messages per commit (scraped from /metrics)."""
import os, re, sys, urllib.request
root = os.environ["H2ROOT"]
sys.path.insert(0, os.path.join(root, "scripts"))
sys.path.insert(0, root)
import bench

def tasks(pid):
    out = {}
    tck = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            raw = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue
        name = raw[raw.index("(")+1:raw.rindex(")")]
        f = raw[raw.rindex(")")+2:].split()
        st = open(f"/proc/{pid}/task/{tid}/status").read()
        import re as _re
        v = int(_re.search(r"^voluntary_ctxt_switches:\s+(\d+)", st, _re.M).group(1))
        nv = int(_re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", st, _re.M).group(1))
        out[tid] = (name[:12], int(f[11]) / tck, int(f[12]) / tck, v, nv)
    return out

def main():
    sys.argv = [os.path.join(root, "scripts/bench.py")] + sys.argv[1:]
    servers = []
    orig_init = bench.Server.__init__
    def init(self, *a, **k):
        orig_init(self, *a, **k); servers.append(self)
    bench.Server.__init__ = init
    def commits():
        s = servers[-1]
        text = urllib.request.urlopen(s.admin.base_url + "/metrics", timeout=30).read().decode()
        m = re.search(r"^qm2qm_store_commit_duration_seconds_count\S* (\S+)", text, re.M)
        return float(m.group(1))
    orig_run = bench.run_load
    def run_load(port, specs, duration, processes, server_pid=None):
        c0 = commits() if servers and server_pid else None
        st = None
        if os.environ.get("H2PERF") and server_pid:
            import subprocess
            out = f"/tmp/h2/perf-{os.path.basename(root)}-{server_pid}-{len(specs)}.data"
            st = subprocess.Popen(["perf", "record", "-F", "2000", "-s", "-p", str(server_pid), "-o", out],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            import time; time.sleep(0.5)
        if os.environ.get("H2STRACE") and server_pid:
            import subprocess
            out = f"/tmp/h2/strace-{os.path.basename(root)}-{server_pid}-{len(specs)}.txt"
            st = subprocess.Popen(["strace", "-c", "-f", "-p", str(server_pid), "-o", out],
                                  stderr=subprocess.DEVNULL)
            import time; time.sleep(0.5)
        t0 = tasks(server_pid) if server_pid else {}
        r = orig_run(port, specs, duration, processes, server_pid)
        t1 = tasks(server_pid) if server_pid else {}
        if server_pid and r["messages"]:
            parts = "  ".join(f"{t1[k][0]}: {(t1[k][1]-t0.get(k,(0,0,0))[1])/r['messages']*1e6:.1f}u+"
                              f"{(t1[k][2]-t0.get(k,(0,0,0))[2])/r['messages']*1e6:.1f}s"
                              f" cs/msg {(t1[k][3]-t0.get(k,(0,0,0,0,0))[3])/r['messages']:.2f}v"
                              f"+{(t1[k][4]-t0.get(k,(0,0,0,0,0))[4])/r['messages']:.2f}nv" for k in t1 if 'worker' not in t1[k][0])
            print("    per-thread CPU us/msg:", parts, flush=True)
        if st is not None:
            import signal; st.send_signal(signal.SIGINT); st.wait(); print("    strace:", out)
        if c0 is not None:
            c = commits() - c0
            print(f"    [{root}] commits {c:.0f}  messages {r['messages']}  msgs/commit {r['messages']/max(c,1):.2f}"
                  f"  cpu us/msg {r['cpu_us_per_call']*r['calls']/max(r['messages'],1):.1f}", flush=True)
        return r
    bench.run_load = run_load
    if os.environ.get("H2SPY"):
        orig_popen = bench.subprocess.Popen
        def popen(cmd, *a, **k):
            if cmd and str(cmd[0]).endswith("py-spy"):
                cmd = [cmd[0], cmd[1], *os.environ["H2SPY"].split(), *cmd[2:]]
            return orig_popen(cmd, *a, **k)
        bench.subprocess.Popen = popen
    bench.main()

if __name__ == "__main__":
    main()
