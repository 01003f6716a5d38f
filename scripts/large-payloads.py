"""Eight callers send 3.6 MB calls to `a` while one times `b` (scripts/large-payloads.sh).

    large-payloads.py GATEWAY_URL GATEWAY_PID [ROUNDS] [TOOL]
"""
import http.client, json, multiprocessing, sys, threading, time, statistics, urllib.parse

url = urllib.parse.urlparse(sys.argv[1]); pid = int(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
tool = sys.argv[4] if len(sys.argv) > 4 else "a__echo"

def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024

class Client:
    def __init__(self):
        self.c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        self.sid = None; self.n = 0
        r = self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "big", "version": "0"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    def post(self, body):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.sid: h["Mcp-Session-Id"] = self.sid
        self.c.request("POST", url.path, json.dumps(body), h)
        r = self.c.getresponse(); data = r.read()
        self.sid = r.getheader("Mcp-Session-Id") or self.sid
        return r.status, data
    def rpc(self, method, params):
        self.n += 1
        status, data = self.post({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        for line in data.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                m = json.loads(line[5:])
                if m.get("id") == self.n: return m
        try: return json.loads(data)
        except Exception: raise RuntimeError(f"{status} {data[:200]!r}")

big_text = "x" * 10
pad = [{"k": i, "v": "abcdefgh", "f": [1.5, 2, True]} for i in range(70_000)]
print("payload bytes", len(json.dumps({"text": big_text, "pad": pad})))
def big(errors):
    c = Client()
    for _ in range(rounds):
        m = c.rpc("tools/call", {"name": tool, "arguments": {"text": big_text, "pad": pad}})
        if "result" not in m or m["result"].get("isError"): errors.append(str(m)[:200])

def add(client):
    t = time.perf_counter(); client.rpc("tools/call", {"name": "b__add", "arguments": {"a": 1, "b": 2}})
    return time.perf_counter() - t

# The neighbour is a process of its own: timed in the callers' process, it
# also timed the callers' own JSON work on 3.6-12 MB (Python's GIL).
def neighbour(stop, out):
    client = Client(); add(client); lat = []
    while not stop.is_set(): lat.append(add(client))
    out.send(lat)

probe = Client(); add(probe)
base = [add(probe) for _ in range(50)]
rss0 = rss(); errors = []; peak = rss0
fork = multiprocessing.get_context("fork")
stop = fork.Event(); mine, theirs = fork.Pipe()
timer = fork.Process(target=neighbour, args=(stop, theirs)); timer.start()
threads = [threading.Thread(target=big, args=(errors,)) for _ in range(8)]
for t in threads: t.start()
while any(t.is_alive() for t in threads):
    peak = max(peak, rss()); time.sleep(0.002)
for t in threads: t.join()
stop.set(); lat = mine.recv(); timer.join()
time.sleep(5); after5 = rss(); time.sleep(10)
q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000
print(f"neighbour baseline p50 {q(base,.5):.1f} ms p99 {q(base,.99):.1f} ms")
print(f"neighbour during big calls: n={len(lat)} p50 {q(lat,.5):.1f} ms p99 {q(lat,.99):.1f} ms max {max(lat)*1000:.0f} ms")
print(f"RSS MiB: before {rss0}, peak {peak}, 5 s after {after5}, 15 s after {rss()}; big-call errors: {len(errors)} {errors[:1]}")
