"""What every long-running process needs from its host: logs, the clock, systemd's
notify socket and the control socket.
"""
