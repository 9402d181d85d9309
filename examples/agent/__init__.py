"""An agent turn (the OpenAI Agents SDK, two tools) traced with openai-latency: see turn.py."""
