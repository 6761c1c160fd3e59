"""What the daemons' logs say about their broker session: each fault once, then rarely.

A broker that stays unreachable, or keeps refusing the login, is retried for as long as it
lasts (every ``reconnect_max_s`` at most); a line per retry would bury everything else. So
each fault is logged when it starts or changes, and again every :data:`REMIND_S` while it
lasts (with the number of attempts since). A refused login is an error (a restart will not
fix a wrong password), not "unreachable". A publish the broker refuses is logged once per
topic, until a publish there is accepted again. A clean stop says nothing of the broker.
The "then rarely" is the product's one log throttle
(:class:`~progressived.runtime.ratelimit.RateLimitedLog`), one window per fault.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from progressived.mqtt.session import MqttSession, SessionState
from progressived.runtime.ratelimit import RateLimitedLog

REMIND_S = 300.0  # a lasting fault is logged again this often


class LoggedSession:
    """A :class:`~progressived.mqtt.session.SessionObserver` that logs through structlog."""

    def __init__(
        self,
        logger: str = "progressived.mqtt",
        remind_s: float = REMIND_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = structlog.get_logger(logger)
        self._faults = RateLimitedLog(1, remind_s, logger=self.log, clock=clock)  # per fault
        self._said: tuple[str, str] | None = None  # the fault last logged

    def connected(self, session: MqttSession) -> None:
        o = session.options
        self.log.info(
            "broker connected",
            broker=o.url,
            client_id=o.client_id,
            mqtt="5" if session.v5 else "3.1.1",
            attempts=session.attempts,
        )
        if self._said is not None:
            self._faults.forget(self._said)
        self._said = None

    def disconnected(self, session: MqttSession, retry_in_s: float | None) -> None:
        fault = (session.state, session.detail)
        fields: dict[str, object] = {"broker": session.options.url, "reason": session.detail}
        if retry_in_s is not None:
            fields["retry_in_s"] = round(retry_in_s, 2)
        if fault != self._said or session.was_connected:
            # A fault that starts or changes is said at once, and so is a connection that
            # ends (always worth a line); the retries after it are not.
            self._faults.forget(fault)
        quiet = self._faults.admit(fault)
        if quiet is None:
            return
        if quiet:
            fields["attempts_since_last_line"] = quiet
        if session.was_connected:
            self.log.warning("broker connection lost", **fields)
        elif session.state is SessionState.NOT_AUTHORISED:
            self.log.error(
                "broker refused the login: not authorised",
                username=session.options.username,
                **fields,
            )
        else:
            self.log.warning("broker unreachable", **fields)
        self._said = fault

    def denied(self, session: MqttSession, topic: str, reason: str, first: bool) -> None:
        if first:
            self.log.error(
                "broker refused a publish (check the ACL and the user name)",
                topic=topic,
                reason=reason,
                username=session.options.username,
            )

    def accepted(self, session: MqttSession, topic: str) -> None:
        self.log.info("broker accepts publishes again", topic=topic)

    def downgraded(self, session: MqttSession) -> None:
        self.log.warning(
            "broker speaks MQTT 3.1.1 only: a publish it refuses cannot be seen",
            broker=session.options.url,
        )
