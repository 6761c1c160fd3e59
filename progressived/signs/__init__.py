"""Meter signs outside the daemon: the terminal sign and the web sign (``web/``); they
read the broker exactly as a vendor's sign does (docs/mqtt.md).
"""
