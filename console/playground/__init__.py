"""Chat playground: a page and a WebSocket streaming a Running cluster's answers.

The browser never talks to the engine: the consumer does.
"""
