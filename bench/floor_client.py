"""The floor for `ask --plain` (issue 25 point 2): the same streamed chat request with the
standard library alone (http.client + json), its answer printed as it arrives. No retries,
no errors mapped, nothing saved: what a one-shot request costs at the least.

Run: python bench/floor_client.py BASE_URL PROMPT   (BASE_URL like http://127.0.0.1:PORT/v1)
"""

import http.client
import json
import sys
import urllib.parse

base, prompt = sys.argv[1], sys.argv[2]
url = urllib.parse.urlsplit(base)
if url.scheme == "https":  # trusting SSL_CERT_FILE, as OpenSSL's default paths do
    import ssl

    ctx = ssl.create_default_context()
    conn: http.client.HTTPConnection = http.client.HTTPSConnection(
        url.hostname or "127.0.0.1", url.port or 443, timeout=60, context=ctx
    )
else:
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=60)
body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": prompt}]}
headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
conn.request("POST", url.path.rstrip("/") + "/chat/completions", json.dumps(body), headers)
resp = conn.getresponse()
if resp.status != 200:
    sys.exit(f"HTTP {resp.status}")
for raw in resp:
    line = raw.strip()
    if not line.startswith(b"data:") or line == b"data: [DONE]":
        continue
    for choice in json.loads(line[5:]).get("choices") or []:
        piece = (choice.get("delta") or {}).get("content")
        if piece:
            sys.stdout.write(piece)
            sys.stdout.flush()
sys.stdout.write("\n")
