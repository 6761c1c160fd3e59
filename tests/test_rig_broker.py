"""The rig's broker is the test's own: a port taken by someone else is never shared."""

from __future__ import annotations

import socket

import pytest

from progressived.testing.broker import BrokerUnavailable, Mosquitto


def test_a_taken_port_is_chosen_again_not_shared() -> None:
    """Under parallel tests a free port can be taken between choosing and binding; merely
    connecting would then reach the other test's broker. The rig waits until its own
    Mosquitto holds the listening socket and otherwise starts it again on another port."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        with Mosquitto(port=taken) as broker:
            assert broker.port != taken
            assert broker.proc is not None and broker.proc.poll() is None
            with socket.create_connection((broker.host, broker.port), timeout=5):
                pass


def test_a_restart_on_a_taken_port_says_so() -> None:
    """A restarted broker keeps its port (its clients reconnect there): if that port is
    taken meanwhile, the restart fails in one line instead of joining another broker."""
    with Mosquitto() as broker:
        broker.stop()
        with socket.socket() as other:
            other.bind(("127.0.0.1", broker.port))
            other.listen()
            with pytest.raises(BrokerUnavailable, match="could not listen"):
                broker.start()
