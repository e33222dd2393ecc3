"""Bad requests that Gradio answers with a traceback in the server log, answered instead with a
sentence for the client and nothing in the log: an API name or event number that does not exist,
named arguments missing, too few inputs, an example the page does not have, and a page's stream
asked for after its session is gone (a tab left open while the server restarted). The log keeps
its tracebacks for the server's own faults.
"""
from __future__ import annotations

import json

import gradio as gr
from gradio.route_utils import FnIndexInferError
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

INFO = "GET /gradio_api/info lists this server's endpoints and their inputs"


def sentence(error: Exception, path: str) -> str | None:
    """What to tell a client whose request raised `error` at `path`; None for the server's own faults."""
    if isinstance(error, FnIndexInferError):
        return f"There is no API endpoint named {path.rstrip('/').rsplit('/', 1)[-1]!r}: {INFO}."
    if isinstance(error, KeyError) and path.rstrip("/").endswith(("/run/predict", "/queue/join")):
        return f"There is no event number {error.args[0]!r} on this page: reload the page ({INFO})."
    if isinstance(error, TypeError) and "/call/v2/" in path and "argument" in str(error):
        return f"{str(error).rstrip('.')}; {INFO}."  # gradio_client's own sentence, naming the argument
    return None


class AnswerBadRequests:
    """ASGI middleware: a request that raised one of sentence()'s errors is answered 404 with it,
    as JSON ({"error": ...}). A stream that had begun has told its client already (Gradio's queue
    sends the error down the stream before raising): it ends there, unlogged."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            if started and isinstance(error.__cause__, HTTPException):
                # Starlette could not send the HTTP error: the stream's own message did. It ends here.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            answer = sentence(error, scope.get("path", ""))
            if started or answer is None:
                raise
            body = json.dumps({"error": answer}).encode()
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})


def quiet_input_checks(blocks: gr.Blocks) -> None:
    """Gradio's own checks of an event's inputs (how many; an example's index) raise errors its queue
    prints with a traceback: raised as gr.Error instead, which goes to the client alone."""
    validate, preprocess = blocks.validate_inputs, blocks.preprocess_data

    def validate_inputs(block_fn, inputs):
        try:
            validate(block_fn, inputs)
        except ValueError:
            wanted = [getattr(block, "label", None) or type(block).__name__ for block in block_fn.inputs]
            raise gr.Error(f"This event takes {len(wanted)} inputs ({', '.join(map(str, wanted))}), got {len(inputs)}: "
                           f"send them all, in that order, or name those you set through gradio_client, which fills in the rest ({INFO}).",
                           print_exception=False) from None

    async def preprocess_data(block_fn, inputs, state, explicit_call=False):
        try:
            return await preprocess(block_fn, inputs, state, explicit_call)
        except gr.exceptions.ComponentProcessingError as error:
            said = " ".join([line.strip() for line in str(error).splitlines() if line.strip()][:2])  # what, and what it expected
            raise gr.Error(f"{said} ({INFO}).", print_exception=False) from None

    blocks.validate_inputs, blocks.preprocess_data = validate_inputs, preprocess_data


MIDDLEWARE = [Middleware(AnswerBadRequests)]  # for Gradio's launch(app_kwargs=dict(middleware=...))
