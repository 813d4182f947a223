_instruments = ("claude-agent-sdk >= 0.1.0, < 0.3",)
