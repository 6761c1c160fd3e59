"""The link controller process: configuration, the broker session, metrics, the loops."""
