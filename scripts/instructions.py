#!/usr/bin/env python3
"""Instructions per request, counted by callgrind: figures that do not move with the host.

Wall-clock ratios (tp-bench) move with the machine's load and CPU steal; the number of
instructions a process executes for one request does not. This script runs, each under
`valgrind --tool=callgrind` in turn:

  - the bare baseline (`tp-bench bare`: axum answering every request with the edge's own
    warm `tools/list` bytes),
  - a standalone release edge (`tp-edge`), against `toolplane up` (control plane, demo
    executor and wiki in another process, not counted),
  - the proxy baseline (`tp-bench bare-proxy`: axum reading each request, making one signed
    `Invoke` of `discover_apis` on the same demo executor through tonic, and answering with
    the edge's own `tools/call` bytes: the floor of any MCP-to-gRPC proxy on this stack),

runs each process twice, sending N/4 and then N requests one after another on one keep-alive
connection before stopping it, and prints the difference of the two totals divided by 3N/4 —
instructions per request, with start-up, the first (cold) requests and shutdown cancelled out:

  bare server, warm `tools/list` on the edge (2025-11-25 and 2026-07-28), and `tools/call`
  (`discover_apis`, answered by the demo executor) on the edge,

with the ratio of the warm list to the bare server, and for the edge the same figures for its
request path alone (its service, inclusive: steadier than the totals), and for every process
the allocator's share (the inclusive cost of malloc, free and their kin, glibc's or
mimalloc's: the share says how much of a ratio is the allocator's, whichever each links). The totals cover the whole process
(every thread), so timers that tick while the longer run lasts are counted too; they are
small beside N requests. (Zeroing and dumping the counters of a running process through
`callgrind_control` interrupts its system calls, which the bare server does not survive.) Targets (issue 33): warm list <= 1.5x the bare server,
<= 120 k instructions per `tools/call` on the edge; `--check` exits 1 when one is missed.

Usage: python3 scripts/instructions.py [--requests N] [--check] [--no-build] [--keep]
Needs valgrind (installed from Debian's packages when missing) and builds the release
binaries first (`cargo build --release --bins`), unless --no-build.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/toolplane-target"))
RELEASE = os.path.join(TARGET, "release")
STATELESS = "2026-07-28"
LEGACY = "2025-11-25"
# The edge's service, inclusive: the request path alone, without the HTTP server around it
# (steadier than the totals, which carry start-up work that lands in one run of a pair).
REQUEST_PATH = "tp_edge::app::router::EdgeService::answer::{{closure}}"
WARM_TARGET = 1.5
CALL_TARGET = 120_000
# The allocator's entry points (glibc's, and mimalloc's, measured on 2026-11-29 and not kept):
# their inclusive cost is the allocator's share of a request.
ALLOCATOR = {"malloc", "free", "realloc", "calloc", "posix_memalign", "mi_malloc_aligned",
             "mi_zalloc_aligned", "mi_realloc_aligned", "mi_free"}
RUNS = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, what, process, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"{what} exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"{what} did not listen on {port} within {timeout} s")


def wait_ready(port, what, timeout=120):
    """Until `GET /readyz` answers 200: for the edge, its registry watch is open and caught up,
    so that no start-up work lands in one run of a pair and not the other."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/readyz")
            status = connection.getresponse().status
            connection.close()
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"{what} was not ready within {timeout} s")


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def list_request(version, key):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
    }
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if version == STATELESS:
        headers["Mcp-Method"] = "tools/list"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {}}}}
    else:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return headers, json.dumps(body).encode()


def call_request(key):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "discover_apis",
        "Authorization": f"Bearer {key}",
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "discover_apis", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    return headers, json.dumps(body).encode()


def send(port, request, n, expect):
    """n requests on one keep-alive connection; each answer must contain `expect`."""
    headers, body = request
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(n):
        connection.request("POST", "/mcp", body=body, headers=headers)
        response = connection.getresponse()
        text = response.read()
        if response.status != 200 or expect not in text:
            sys.exit(f"unexpected answer on port {port}: {response.status} {text[:300]!r}")
    connection.close()


def save_answer(port, request, path):
    """The edge's answer to one request, written to `path` (what a baseline answers with)."""
    headers, body = request
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/mcp", body=body, headers=headers)
    answer = connection.getresponse().read()
    connection.close()
    with open(path, "wb") as f:
        f.write(answer)
    return path


def total_instructions(path):
    """The Ir total of one callgrind output file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"(summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(2))
    sys.exit(f"no instruction total in {path}")


def inclusive_instructions(path, function):
    """The inclusive Ir of `function` in one callgrind output file (None when it is absent),
    and the inclusive Ir of the allocator's entry points (ALLOCATOR) together."""
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                               capture_output=True, text=True).stdout
    found, allocator = None, 0
    for line in annotated.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:(.*) \[", line)
        if not m:
            continue
        if m.group(2) == function:
            found = int(m.group(1).replace(",", ""))
        if m.group(2) in ALLOCATOR:
            allocator += int(m.group(1).replace(",", ""))
    return found, allocator


def run_once(out_dir, argv, env, log, port, request, expect, count, what, function=None):
    """Starts `argv` under callgrind, sends `count` requests, stops it; its total Ir, and
    `function`'s inclusive Ir (None when it is not found), and the allocator's."""
    process = valgrind(out_dir, argv, env, log)
    try:
        wait_port(port, what, process)
        wait_ready(port, what)
        send(port, request, count, expect)
    finally:
        process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    path = os.path.join(out_dir, f"callgrind.{process.pid}")
    found, allocator = inclusive_instructions(path, function)
    return total_instructions(path), found, allocator


def measure(out_dir, argv, env, log, port, request, expect, n, what, function=None):
    """Instructions per request: two runs of the same process, with n/4 and n requests; the
    difference divided by 3n/4 (start-up, warm-up and shutdown cancel out). The median of
    RUNS pairs and every pair's figure; the same for `function` alone (inclusive), when one
    is named and found in every run, else None; the median of the allocator's share."""
    print(f"measuring {what} ...", file=sys.stderr, flush=True)
    few = max(1, n // 4)
    per_request, in_function, in_allocator = [], [], []
    for _ in range(RUNS):
        small, small_in, small_alloc = run_once(out_dir, argv, env, log, port, request, expect,
                                                few, what, function)
        large, large_in, large_alloc = run_once(out_dir, argv, env, log, port, request, expect,
                                                n, what, function)
        per_request.append((large - small) / (n - few))
        in_allocator.append((large_alloc - small_alloc) / (n - few))
        if small_in is not None and large_in is not None:
            in_function.append((large_in - small_in) / (n - few))
    alone = median(in_function) if function and len(in_function) == RUNS else None
    return median(per_request), per_request, alone, in_function, median(in_allocator)


def valgrind(out_dir, argv, env, log):
    command = ["valgrind", "--tool=callgrind", "--dump-instr=no", "--collect-jumps=no",
               f"--callgrind-out-file={out_dir}/callgrind.%p"] + argv
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--keep", action="store_true",
                        help="keep the callgrind files (for callgrind_annotate) and say where")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        subprocess.run("apt-get update -qq && apt-get install -y -qq valgrind", shell=True, check=True)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--bins", "--quiet"], cwd=ROOT, check=True,
                       env={**os.environ, "CARGO_TARGET_DIR": TARGET})
    n = args.requests
    work = tempfile.mkdtemp(prefix="tp-instructions-")
    out_dir = os.path.join(work, "callgrind")
    os.makedirs(out_dir)
    env = {**os.environ, "TOKIO_WORKER_THREADS": "1", "NO_COLOR": "1"}
    processes = []
    try:
        # The stack behind the edge, not counted.
        ready = os.path.join(work, "ready")
        executor_port = free_port()
        up_log = open(os.path.join(work, "up.log"), "w")
        up = subprocess.Popen(
            [os.path.join(RELEASE, "toolplane"), "up", "--data-dir", os.path.join(work, "data"),
             "--mcp-listen", "127.0.0.1:0", "--grpc-listen", f"127.0.0.1:{free_port()}",
             "--executor-listen", f"127.0.0.1:{executor_port}", "--wiki-listen", "127.0.0.1:0",
             "--admin-listen", "127.0.0.1:0", "--ready-file", ready],
            env=env, stdout=up_log, stderr=subprocess.STDOUT)
        processes.append(up)
        deadline = time.time() + 120
        while not os.path.exists(ready):
            if up.poll() is not None or time.time() > deadline:
                sys.exit(f"toolplane up did not start; see {work}/up.log")
            time.sleep(0.2)
        credentials = json.load(open(os.path.join(work, "data", "credentials.json")))
        key = next(k["key"] for k in credentials["keys"]
                   if k["tenant"] == "acme" and k["role"] == "collector")

        # The edge under callgrind, against up's control plane (a new edge process per run:
        # its first requests load the caller's registry and identity; the difference of two
        # runs leaves them out).
        edge_port = free_port()
        edge_env = {**env,
                    "TOOLPLANE_EDGE_LISTEN": f"127.0.0.1:{edge_port}",
                    "TOOLPLANE_EDGE_ADMIN_LISTEN": "127.0.0.1:0",
                    # Work by the clock (the watch's heartbeat, the audit flush) is not work
                    # per request: under valgrind a run lasts seconds, and how many ticks land
                    # in the longer run of a pair would move the figure by thousands.
                    "TOOLPLANE_EDGE_WATCH__HEARTBEAT_MS": "60000",
                    "TOOLPLANE_EDGE_WATCH__DEAD_AFTER_MS": "600000",
                    "TOOLPLANE_EDGE_AUDIT__FLUSH_MS": "600000"}
        edge_argv = [os.path.join(RELEASE, "tp-edge"),
                     "--control-plane", "http://" + credentials["grpc_addr"],
                     "--edge-token-file", os.path.join(work, "data", "edge-token")]
        edge_log = open(os.path.join(work, "edge.log"), "w")
        warm_legacy = measure(out_dir, edge_argv, edge_env, edge_log, edge_port,
                              list_request(LEGACY, key), b'"tools"', n,
                              f"the edge's warm tools/list at {LEGACY}", REQUEST_PATH)
        warm_stateless = measure(out_dir, edge_argv, edge_env, edge_log, edge_port,
                                 list_request(STATELESS, key), b'"tools"', n,
                                 f"the edge's warm tools/list at {STATELESS}", REQUEST_PATH)
        call = measure(out_dir, edge_argv, edge_env, edge_log, edge_port, call_request(key),
                       b'"result"', n, "the edge's tools/call", REQUEST_PATH)

        # The bare server, with the edge's own warm answer (fetched from a plain edge).
        edge = subprocess.Popen(edge_argv, env=edge_env, stdout=edge_log,
                                stderr=subprocess.STDOUT)
        processes.append(edge)
        wait_port(edge_port, "the edge", edge)
        answer_file = save_answer(edge_port, list_request(LEGACY, key),
                                  os.path.join(work, "answer.json"))
        bare_port = free_port()
        bare_log = open(os.path.join(work, "bare.log"), "w")
        baseline = measure(out_dir, [os.path.join(RELEASE, "tp-bench"), "bare", str(bare_port),
                                     answer_file], env, bare_log, bare_port,
                           list_request(LEGACY, key), b'"tools"', n, "the bare server")

        # The proxy baseline: HTTP in, one signed gRPC call to the same executor, the edge's
        # own call answer out; none of the edge's work between.
        call_answer_file = save_answer(edge_port, call_request(key),
                                       os.path.join(work, "call-answer.json"))
        proxy_port = free_port()
        proxy_log = open(os.path.join(work, "bare-proxy.log"), "w")
        proxy = measure(out_dir, [os.path.join(RELEASE, "tp-bench"), "bare-proxy", str(proxy_port),
                                  call_answer_file, f"http://127.0.0.1:{executor_port}",
                                  os.path.join(work, "data", "edge-token")],
                        env, proxy_log, proxy_port, call_request(key), b'"result"', n,
                        "the bare proxy")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    (baseline, baseline_runs, _, _, baseline_alloc) = baseline
    (warm_legacy, legacy_runs, legacy_path, legacy_path_runs, legacy_alloc) = warm_legacy
    (warm_stateless, stateless_runs, stateless_path, stateless_path_runs,
     stateless_alloc) = warm_stateless
    (call, call_runs, call_path, call_path_runs, call_alloc) = call
    (proxy, proxy_runs, _, _, proxy_alloc) = proxy
    rows = [
        ("bare server, same bytes", baseline, baseline_runs, baseline_alloc, None),
        (f"edge warm tools/list, {LEGACY}", warm_legacy, legacy_runs, legacy_alloc,
         f"{warm_legacy / baseline:.2f}x bare"),
        (f"edge warm tools/list, {STATELESS}", warm_stateless, stateless_runs, stateless_alloc,
         f"{warm_stateless / baseline:.2f}x bare"),
        (f"edge tools/call discover_apis, {STATELESS}", call, call_runs, call_alloc,
         f"{call / proxy:.2f}x bare proxy"),
        ("bare proxy: HTTP in, signed gRPC call out", proxy, proxy_runs, proxy_alloc, None),
    ]
    print(f"instructions per request (callgrind; median of {RUNS} pairs of runs with {n // 4} "
          f"and {n} sequential requests on one connection; one runtime worker; whole process; "
          f"in brackets, the allocator's share: {', '.join(sorted(ALLOCATOR))}, inclusive)")
    for name, value, runs, allocator, note in rows:
        spread = " / ".join(f"{r / 1000:.1f}k" for r in runs)
        print(f"  {name:<44} {value:>10,.0f}   ({spread})   [allocator {allocator / 1000:.1f}k]"
              + (f"   {note}" if note else ""))
    print(f"the edge's request path alone ({REQUEST_PATH}, inclusive; no HTTP server):")
    for name, value, runs in [(f"warm tools/list, {LEGACY}", legacy_path, legacy_path_runs),
                              (f"warm tools/list, {STATELESS}", stateless_path,
                               stateless_path_runs),
                              (f"tools/call discover_apis, {STATELESS}", call_path,
                               call_path_runs)]:
        if value is None:
            print(f"  {name:<44} {'n/a':>10}   (the function was not found: renamed?)")
        else:
            spread = " / ".join(f"{r / 1000:.1f}k" for r in runs)
            print(f"  {name:<44} {value:>10,.0f}   ({spread})")
    # The same ratios with each process's allocator share left out: what the edge's own work
    # costs beside the bare server's, whichever allocator each links.
    bare_own = baseline - baseline_alloc
    print(f"without the allocator's share: warm tools/list {LEGACY} "
          f"{(warm_legacy - legacy_alloc) / bare_own:.2f}x bare, {STATELESS} "
          f"{(warm_stateless - stateless_alloc) / bare_own:.2f}x bare; tools/call "
          f"{(call - call_alloc) / (proxy - proxy_alloc):.2f}x bare proxy")
    worst_warm = max(warm_legacy, warm_stateless) / baseline
    print(f"targets: warm list <= {WARM_TARGET}x bare (worst {worst_warm:.2f}x); "
          f"tools/call <= {CALL_TARGET:,} on the edge ({call:,.0f})")
    if args.keep:
        print(f"callgrind files kept in {out_dir} (one per run, callgrind.<pid>, in run order)")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if args.check and (worst_warm > WARM_TARGET or call > CALL_TARGET):
        sys.exit(1)


if __name__ == "__main__":
    main()
