"""The inference gateway (``/v1/...``): API keys, health-aware routing, OpenAI and
Anthropic protocols."""
