"""Model clients: the ModelClient protocol and its request/reply types, the Anthropic, OpenAI and
OpenAI-compatible clients on one shared SDK scaffold (sdk_client), structured-output support, the
guard (deadline, retries, concurrency) and the registry that turns a model string into a client.

May import: judges.errors. SDKs (anthropic, openai) are imported lazily, inside the client.
"""
