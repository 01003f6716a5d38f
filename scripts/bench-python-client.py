#!/usr/bin/env python3
"""The P3 baseline of `make bench`: the Python `mcp` SDK client calling `echo`
in a loop on one streamable-HTTP session, the way a Python agent would.

Run with the venv that scripts/install-test-deps.sh builds (.tools/venv), e.g.

    .tools/venv/bin/python scripts/bench-python-client.py --url http://127.0.0.1:PORT/mcp

Prints one JSON line (the shape of mcp-bench's LoopResult): calls, errors,
elapsed_s, cpu_s (this process's user+system time during the measured loop,
from getrusage), samples_ns (per-call latency), peak_rss_kib (VmHWM).
"""

import argparse
import logging
import asyncio
import json
import resource
import sys
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_kib() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


async def main(url: str, seconds: float, warmup_seconds: float) -> dict:
    arguments = {"text": "hello"}
    async with streamable_http_client(url) as (read, write, _session_id):
        async with ClientSession(read, write) as session:
            await session.initialize()
            warm_end = time.perf_counter() + warmup_seconds
            while time.perf_counter() < warm_end:
                await session.call_tool("echo", arguments)

            samples = []
            errors = 0
            cpu_before = cpu_seconds()
            start = time.perf_counter()
            end = start + seconds
            while True:
                began = time.perf_counter_ns()
                if began >= end * 1e9:
                    break
                result = await session.call_tool("echo", arguments)
                if result.isError:
                    errors += 1
                else:
                    samples.append(time.perf_counter_ns() - began)
            elapsed = time.perf_counter() - start
            cpu = cpu_seconds() - cpu_before
    return {
        "calls": len(samples),
        "errors": errors,
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "samples_ns": samples,
        "peak_rss_kib": peak_rss_kib(),
        "observed_cpu_s": None,
        "extra": {},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the MCP endpoint")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds")
    parser.add_argument("--warmup-seconds", type=float, default=0.5, help="unmeasured seconds first")
    args = parser.parse_args()
    # The SDK warns when the server answers the closing DELETE with 202; not our concern here.
    logging.getLogger("mcp").setLevel(logging.ERROR)
    result = asyncio.run(main(args.url, args.seconds, args.warmup_seconds))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
