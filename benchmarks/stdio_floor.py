"""The floor `tools/bench-stdio` compares rypsok with: the least a Python/Trio process can do.

Per line read from stdin: decode it as JSON, send one GET over a kept-alive loopback
connection to the engine, read the answer up to its declared length, decode its JSON body
and write one JSON-RPC result line to stdout. No validation, cleaning, ranking, limits,
logging or deadlines: what is left of a call is the interpreter, Trio's loop and the four
system calls every stdio round trip through an HTTP engine needs.

Measured by the benchmark in the same run as rypsok, paced the same way, so that the own
share it prints can be read against what this machine charges any Python process for the
same exchange (`python -m benchmarks.stdio_floor PORT`).
"""

from __future__ import annotations

import json
import sys

import trio

_REQUEST = (
    b"GET /w/api.php?action=query&list=search&format=json&formatversion=2&srlimit=10"
    b"&srsearch=rust+programming+language HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"User-Agent: stdio-floor\r\nAccept: application/json\r\n\r\n"
)


async def _main(port: int) -> None:
    stdin = trio.lowlevel.FdStream(0)
    stdout = trio.lowlevel.FdStream(1)
    engine = await trio.open_tcp_stream("127.0.0.1", port)
    lines = b""
    answers = b""
    while True:
        while b"\n" not in lines:
            data = await stdin.receive_some(65536)
            if not data:
                return
            lines += data
        line, lines = lines.split(b"\n", 1)
        message = json.loads(line)
        await engine.send_all(_REQUEST)
        while b"\r\n\r\n" not in answers:
            answers += await engine.receive_some(65536)
        head, answers = answers.split(b"\r\n\r\n", 1)
        length = next(
            int(field.split(b":", 1)[1])
            for field in head.split(b"\r\n")
            if field.lower().startswith(b"content-length:")
        )
        while len(answers) < length:
            answers += await engine.receive_some(65536)
        body, answers = answers[:length], answers[length:]
        hits = json.loads(body)["query"]["search"]
        result = {
            "isError": False,
            "content": [{"type": "text", "text": json.dumps(hits)}],
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await stdout.send_all(json.dumps(reply).encode() + b"\n")


if __name__ == "__main__":
    trio.run(_main, int(sys.argv[1]))
