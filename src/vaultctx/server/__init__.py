"""The warm local server (`vaultctx serve`), its discovery file and the CLI's client.

Nothing is imported here: the CLI's client path (`server.client`) must start in a few
milliseconds, while the server itself (`server.app`, `server.run`) pulls in Starlette,
uvicorn and the whole select pipeline.
"""
