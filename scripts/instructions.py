#!/usr/bin/env python3
"""Instructions per request, counted by callgrind: figures that do not move with the host.

Wall-clock ratios (tp-bench) move with the machine's load and CPU steal; the number of
instructions a process executes for one request does not. This script runs, each under
`valgrind --tool=callgrind` in turn:

  - the bare baseline (`tp-bench bare`: axum answering every request with the edge's own
    warm `tools/list` bytes),
  - a standalone release edge (`tp-edge`), against `toolplane up` (control plane, demo
    executor and wiki in another process, not counted),

warms each one, zeroes its counters, sends N requests one after another on one keep-alive
connection, dumps the counters and prints instructions per request:

  bare server, warm `tools/list` on the edge (2025-11-25 and 2026-07-28), and `tools/call`
  (`discover_apis`, answered by the demo executor) on the edge,

with the ratio of the warm list to the bare server. The counters cover the whole process
(every thread) between the zero and the dump, so timers that tick meanwhile are counted too;
they are small beside N requests. Targets (issue 33): warm list <= 1.5x the bare server,
<= 120 k instructions per `tools/call` on the edge; `--check` exits 1 when one is missed.

Usage: python3 scripts/instructions.py [--requests N] [--check] [--no-build]
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
WARM_TARGET = 1.5
CALL_TARGET = 120_000


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


def callgrind_control(flag, pid):
    subprocess.run(["callgrind_control", flag, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def instructions(out_dir, pid, before):
    """Ir of the dump files of `pid` written since `before` (one per thread with --separate-threads=no: one)."""
    total = 0
    found = False
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        if not name.startswith(f"callgrind.{pid}") or path in before:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r"(summary|totals):\s+(\d+)", line)
                if m:
                    total += int(m.group(2))
                    found = True
                    break
    if not found:
        sys.exit(f"no callgrind dump of pid {pid} in {out_dir}")
    return total


def measure(out_dir, process, port, request, n, expect, warmup):
    send(port, request, warmup, expect)
    callgrind_control("-z", process.pid)
    before = {os.path.join(out_dir, f) for f in os.listdir(out_dir)}
    send(port, request, n, expect)
    callgrind_control("-d", process.pid)
    # The dump is written by the process itself; give it a moment to appear.
    deadline = time.time() + 30
    while time.time() < deadline:
        now = {os.path.join(out_dir, f) for f in os.listdir(out_dir)}
        if now - before:
            time.sleep(0.5)
            break
        time.sleep(0.2)
    return instructions(out_dir, process.pid, before) / n


def valgrind(out_dir, argv, env, log):
    command = ["valgrind", "--tool=callgrind", "--dump-instr=no", "--collect-jumps=no",
               f"--callgrind-out-file={out_dir}/callgrind.%p"] + argv
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        subprocess.run("apt-get update -qq && apt-get install -y -qq valgrind", shell=True, check=True)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--bins", "--quiet"], cwd=ROOT, check=True,
                       env={**os.environ, "CARGO_TARGET_DIR": TARGET})
    n, warmup = args.requests, max(200, args.requests // 10)
    work = tempfile.mkdtemp(prefix="tp-instructions-")
    out_dir = os.path.join(work, "callgrind")
    os.makedirs(out_dir)
    env = {**os.environ, "TOKIO_WORKER_THREADS": "1", "NO_COLOR": "1"}
    processes = []
    try:
        # The stack behind the edge, not counted.
        ready = os.path.join(work, "ready")
        up_log = open(os.path.join(work, "up.log"), "w")
        up = subprocess.Popen(
            [os.path.join(RELEASE, "toolplane"), "up", "--data-dir", os.path.join(work, "data"),
             "--mcp-listen", "127.0.0.1:0", "--grpc-listen", f"127.0.0.1:{free_port()}",
             "--executor-listen", "127.0.0.1:0", "--wiki-listen", "127.0.0.1:0",
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

        # The edge under callgrind, against up's control plane.
        edge_port = free_port()
        edge_env = {**env,
                    "TOOLPLANE_EDGE_LISTEN": f"127.0.0.1:{edge_port}",
                    "TOOLPLANE_EDGE_ADMIN_LISTEN": "127.0.0.1:0",
                    }
        edge_log = open(os.path.join(work, "edge.log"), "w")
        edge = valgrind(out_dir, [os.path.join(RELEASE, "tp-edge"),
                                  "--control-plane", "http://" + credentials["grpc_addr"],
                                  "--edge-token-file", os.path.join(work, "data", "edge-token")],
                        edge_env, edge_log)
        processes.append(edge)
        wait_port(edge_port, "the edge", edge)
        warm_legacy = measure(out_dir, edge, edge_port, list_request(LEGACY, key), n,
                              b'"tools"', warmup)
        warm_stateless = measure(out_dir, edge, edge_port, list_request(STATELESS, key), n,
                                 b'"tools"', warmup)
        call = measure(out_dir, edge, edge_port, call_request(key), n, b'"result"', warmup)

        # The bare server, with the edge's own warm answer.
        headers, body = list_request(LEGACY, key)
        connection = http.client.HTTPConnection("127.0.0.1", edge_port, timeout=60)
        connection.request("POST", "/mcp", body=body, headers=headers)
        answer = connection.getresponse().read()
        connection.close()
        answer_file = os.path.join(work, "answer.json")
        open(answer_file, "wb").write(answer)
        bare_port = free_port()
        bare_log = open(os.path.join(work, "bare.log"), "w")
        bare = valgrind(out_dir, [os.path.join(RELEASE, "tp-bench"), "bare", str(bare_port),
                                  answer_file], env, bare_log)
        processes.append(bare)
        wait_port(bare_port, "the bare server", bare)
        baseline = measure(out_dir, bare, bare_port, list_request(LEGACY, key), n, b'"tools"',
                           warmup)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    rows = [
        ("bare server, same bytes", baseline, None),
        (f"edge warm tools/list, {LEGACY}", warm_legacy, f"{warm_legacy / baseline:.2f}x bare"),
        (f"edge warm tools/list, {STATELESS}", warm_stateless,
         f"{warm_stateless / baseline:.2f}x bare"),
        (f"edge tools/call discover_apis, {STATELESS}", call, None),
    ]
    print(f"instructions per request (callgrind, {n} sequential requests on one connection, "
          "one runtime worker, whole process)")
    for name, value, note in rows:
        print(f"  {name:<44} {value:>10,.0f}" + (f"   {note}" if note else ""))
    worst_warm = max(warm_legacy, warm_stateless) / baseline
    print(f"targets: warm list <= {WARM_TARGET}x bare (worst {worst_warm:.2f}x); "
          f"tools/call <= {CALL_TARGET:,} on the edge ({call:,.0f})")
    shutil.rmtree(work, ignore_errors=True)
    if args.check and (worst_warm > WARM_TARGET or call > CALL_TARGET):
        sys.exit(1)


if __name__ == "__main__":
    main()
