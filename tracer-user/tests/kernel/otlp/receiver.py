#!/usr/bin/env python3
"""A minimal OTLP/HTTP logs receiver for tests/otlp.rs: each POST to
/v1/logs is decoded with the OpenTelemetry project's own protobuf classes
(opentelemetry-proto) and appended to OUT as one JSON line per log record
(resource attributes, attributes, severity, body, event name), so the test
asserts on what a collector would see. Headers are recorded too.

    receiver.py OUT PORTFILE [STATUS]

Listens on 127.0.0.1 at a port of the kernel's choosing, written to
PORTFILE once listening. With STATUS (e.g. 503) it answers every request so
and records nothing but the attempt: a collector that refuses.
"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

OUT, PORTFILE = sys.argv[1], sys.argv[2]
STATUS = int(sys.argv[3]) if len(sys.argv) > 3 else 200


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(OUT, "a") as out:
            if STATUS != 200:
                out.write(json.dumps({"refused": self.path}) + "\n")
                self.send_response(STATUS)
                self.end_headers()
                return
            req = ExportLogsServiceRequest()
            req.ParseFromString(body)
            for rl in req.resource_logs:
                for sl in rl.scope_logs:
                    for lr in sl.log_records:
                        out.write(json.dumps({
                            "path": self.path,
                            "content_type": self.headers.get("Content-Type"),
                            "api_key": self.headers.get("api-key"),
                            "resource": attrs(rl.resource.attributes),
                            "scope": sl.scope.name,
                            "attributes": attrs(lr.attributes),
                            "severity_number": lr.severity_number,
                            "severity_text": lr.severity_text,
                            "event_name": lr.event_name,
                            "time_unix_nano": lr.time_unix_nano,
                            "observed_time_unix_nano": lr.observed_time_unix_nano,
                            "body": value(lr.body),
                            "record": MessageToDict(lr),
                        }) + "\n")
        reply = ExportLogsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
