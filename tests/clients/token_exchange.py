"""An OAuth authorization server that does one thing: RFC 8693 token exchange.

Toolplane's edges exchange a tenant's connection token (the subject token) here for a token
meant for an MCP upstream. The tests start it to check what an edge sends and what it does
with the answer; no package on the registries offers this grant on its own.

Environment:
  TX_PORT           port on 127.0.0.1
  TX_CLIENT_ID      the edges' client id
  TX_CLIENT_SECRET  its secret (HTTP Basic, RFC 6749 2.3.1)
  TX_RESOURCE       the resource every request must name (the upstream's URL)
  TX_TOKENS         JSON object: subject token -> token to issue; any other subject is refused
                    with invalid_grant

Each request is logged as one JSON line: the subject's SHA-256 prefix, what was checked, the
answer's status (never a token).
"""

import base64
import hashlib
import json
import os
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"
CLIENT_ID = os.environ["TX_CLIENT_ID"]
SECRET = os.environ["TX_CLIENT_SECRET"]
RESOURCE = os.environ["TX_RESOURCE"]
TOKENS = json.loads(os.environ["TX_TOKENS"])


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass

    def answer(self, status, body, subject=""):
        digest = hashlib.sha256(subject.encode()).hexdigest()[:12] if subject else ""
        print(json.dumps({"status": status, "subject": digest}), flush=True)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("cache-control", "no-store")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, error, description, subject=""):
        self.answer(status, {"error": error, "error_description": description}, subject)

    def do_POST(self):
        if self.path != "/token":
            return self.refuse(404, "not_found", self.path)
        expected = "Basic " + base64.b64encode(
            f"{urllib.parse.quote_plus(CLIENT_ID)}:{urllib.parse.quote_plus(SECRET)}".encode()
        ).decode()
        if self.headers.get("authorization") != expected:
            return self.refuse(401, "invalid_client", "bad client authentication")
        if self.headers.get("content-type") != "application/x-www-form-urlencoded":
            return self.refuse(400, "invalid_request", "not a form")
        length = int(self.headers.get("content-length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode(), strict_parsing=True)
        one = {key: values[0] for key, values in form.items() if len(values) == 1}
        subject = one.get("subject_token", "")
        if one.get("grant_type") != GRANT:
            return self.refuse(400, "unsupported_grant_type", one.get("grant_type", ""))
        if one.get("subject_token_type") != ACCESS:
            return self.refuse(400, "invalid_request", "subject_token_type", subject)
        if one.get("resource") != RESOURCE:
            return self.refuse(400, "invalid_target", one.get("resource", ""), subject)
        if subject not in TOKENS:
            return self.refuse(400, "invalid_grant", "unknown or revoked subject token", subject)
        self.answer(
            200,
            {
                "access_token": TOKENS[subject],
                "issued_token_type": ACCESS,
                "token_type": "Bearer",
                "expires_in": 3600,
            },
            subject,
        )


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["TX_PORT"])), Handler)
print(f"ready {server.server_address[1]}", flush=True)
sys.stdout.flush()
server.serve_forever()
