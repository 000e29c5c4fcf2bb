# A malicious (or broken) head for the weights copy e2e test: serves whatever manifest and file bytes its spec gives,
# to holders of its token, and accepts the workers' reports. Never part of the program; run on a simulated head only.
#   python3 fake-head.py SPEC.json    spec: {"bind", "port", "token", "manifest": {...}, "files": {name: base64}}
import base64
import http.server
import json
import sys
import urllib.parse

spec = json.load(open(sys.argv[1]))
files = {name: base64.b64decode(data) for name, data in spec["files"].items()}


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.headers.get("Authorization") != "Bearer " + spec["token"]:
            return self.reply(401, b"")
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/manifest.json":
            return self.reply(200, json.dumps(spec["manifest"]).encode())
        name = path[len("/files/"):]
        self.reply(200 if name in files else 404, files.get(name, b""))

    def do_POST(self):
        print("report:", self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode(), flush=True)
        self.reply(200, b"")


print("fake head on %s:%d" % (spec["bind"], spec["port"]), flush=True)
http.server.ThreadingHTTPServer((spec["bind"], spec["port"]), Handler).serve_forever()
