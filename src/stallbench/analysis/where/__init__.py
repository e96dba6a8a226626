"""Where did the time go (pure)."""
