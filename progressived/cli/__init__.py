"""Command-line entry points: ``progressived`` (the daemon) and ``progressivectl`` (operators)."""
