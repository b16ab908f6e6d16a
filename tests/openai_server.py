"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for the real client.

It answers by role (the system prompt names it): `script[role]` is a list of answers
consumed in order (the last one repeats).  An answer is a dict: {"content": text},
{"tool_calls": [(name, arguments)]}, {"status": 429} (or any HTTP error), {"delay": s}
before answering, or {"reject_tools": True} (400 when the request carries tools).
Every request body is kept in `requests`, every Authorization header in `auth`.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedServer:
    def __init__(self, script: dict[str, list[dict]]):
        self.script = {role: list(answers) for role, answers in script.items()}
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.lock = threading.Lock()
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def roles_asked(self) -> list[str]:
        return [_role(r) for r in self.requests]

    def _next(self, role: str) -> dict:
        with self.lock:
            answers = self.script.get(role) or [{"content": "{}"}]
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.auth.append(self.headers.get("Authorization", ""))
                answer = server._next(_role(body))
                time.sleep(answer.get("delay", 0))
                if answer.get("reject_tools") and body.get("tools"):
                    return self._send(400, {"error": {"message": "tools are not supported",
                                                      "type": "invalid_request_error"}})
                if "status" in answer:
                    return self._send(answer["status"], {"error": {"message": "scripted",
                                                                   "type": "server_error"}})
                calls = [{"id": f"call_{i}", "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args)}}
                         for i, (name, args) in enumerate(answer.get("tool_calls", []))]
                message = {"role": "assistant", "content": answer.get("content")}
                if calls:
                    message["tool_calls"] = calls
                self._send(200, {"id": "cmpl-1", "object": "chat.completion", "created": 0,
                                 "model": body.get("model", "m"),
                                 "choices": [{"index": 0, "message": message,
                                              "finish_reason": "tool_calls" if calls else "stop"}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                           "total_tokens": 15}})

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _role(body: dict) -> str:
    system = body["messages"][0]["content"]
    for role in ("analyst", "planner", "diagnoser"):
        if f"You are the {role}" in system:
            return role
    return "?"
