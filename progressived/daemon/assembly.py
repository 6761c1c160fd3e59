"""The parts of one table whose ledger is open, built in the order they depend on each other.

The ledger is opened first (:meth:`Controller.start`); everything that reads or writes it is
built here from it, each part given what it needs at construction: the readers (outputs,
publisher, metrics counters) before the journal, whose observers they are; the journal;
then the parts that submit to the journal (board input, link client). Nothing is assigned
into a part after it is built; the one late step is :meth:`TableMetrics.collect`, whose
scrape-time source reads the link client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from progressived.archive.feed.feed import ArchiveFeed
from progressived.archive.feed.metrics import ArchiveCollector
from progressived.board.driver import BoardDriver
from progressived.config.daemon import DaemonConfig
from progressived.config.slips import slip_rules
from progressived.daemon.board_input import BoardInput
from progressived.daemon.current import CurrentTable
from progressived.daemon.health import Health
from progressived.daemon.journal import Journal, LinkSide
from progressived.daemon.ledger_executor import LedgerExecutor
from progressived.daemon.ledger_writer import LedgerWriter
from progressived.daemon.link import LinkClient
from progressived.daemon.link_out import LinkOutbox
from progressived.daemon.metrics import HitCounts, TableMetrics
from progressived.daemon.observers import JournalObservers, KeyLatency, Notify
from progressived.daemon.outbox import LedgerOutbox
from progressived.daemon.outputs import Outputs
from progressived.daemon.slip_printer import SlipPrinting, SlipsCollector
from progressived.daemon.upkeep import MetricsView
from progressived.ledger import Ledger
from progressived.ledger.slips import SlipIssuer
from progressived.link.core.messages import LinkedMeter
from progressived.mqtt.payloads import Topics
from progressived.mqtt.publisher import HeadSource, SignPublisher
from progressived.mqtt.session import MqttSession
from progressived.printing.network import EscposPrinter, NetworkPrinter
from progressived.printing.serial import SerialPrinter

HEAD_READ_TIMEOUT_S = 2.0  # the MQTT status waits this long for the ledger's head


@dataclass(frozen=True, kw_only=True)
class OpenTable:
    """One table's parts over its open ledger."""

    current: CurrentTable
    writer: LedgerWriter
    journal: Journal
    hits: HitCounts
    publisher: SignPublisher
    outputs: Outputs
    board_input: BoardInput
    link: LinkClient | None
    metrics: TableMetrics | None
    archive: ArchiveFeed | None = None
    printing: SlipPrinting | None = None  # the slip printer's queue ([slips.printer])

    @property
    def ledger(self) -> Ledger:
        return self.current.ledger


@dataclass(frozen=True, kw_only=True)
class Surroundings:
    """What a table's parts share with the process: built before the ledger is opened."""

    config: DaemonConfig
    executor: LedgerExecutor
    session: MqttSession
    driver: BoardDriver
    health: Health
    clock: Callable[[], str]
    notify: Notify
    version: str


def head_reader(ledger: Ledger, executor: LedgerExecutor) -> HeadSource:
    """The ledger's head for the MQTT status, read on the ledger thread (so the seq and hash
    are one commit's); None if the ledger thread is busy for longer than a status can wait
    (the status then goes out without it)."""

    async def head() -> tuple[int, str] | None:
        try:
            async with asyncio.timeout(HEAD_READ_TIMEOUT_S):
                return await executor.run(lambda: (ledger.head_seq, ledger.head_hash))
        except TimeoutError:
            return None

    return head


def assemble(ledger: Ledger, around: Surroundings) -> OpenTable:
    """Build the parts over ``ledger`` (opened by ``around.executor``)."""
    config, table_id = around.config, around.config.params.table_id
    topics = Topics(config.mqtt.prefix, table_id)
    current = CurrentTable(config, ledger)
    if config.slips.enabled:  # a payout slip with every award (docs/slips.md)
        rules = slip_rules(config.slips, table_id)
        ledger.issue_slips(SlipIssuer(rules, lambda: current.params))
    metrics = TableMetrics(table_id) if config.metrics.enabled else None
    observe = metrics.key_to_publish.labels(table_id).observe if metrics is not None else None
    latency = KeyLatency(around.notify, observe)
    publisher = SignPublisher(
        around.session,
        topics,
        LedgerOutbox(ledger, around.executor),
        meter_max_rate_hz=config.mqtt.meter_max_rate_hz,
        version=around.version,
        clock=around.clock,
        hooks=latency,
        head=head_reader(ledger, around.executor),
    )
    linked: dict[str, LinkedMeter] = {}  # the link client writes, the outputs draw
    outputs = Outputs(
        current=current,
        publisher=publisher,
        driver=around.driver,
        health=around.health,
        journal_clock=around.executor.journal_clock,
        linked=linked,
    )
    hits = HitCounts()
    observers = JournalObservers(
        table_id=table_id,
        notify=around.notify,
        hits=hits,
        latency=latency,
        metrics=metrics,
        changed=outputs.redraw,
        queued=publisher.wake,
    )
    writer = LedgerWriter(
        current=current,
        executor=around.executor,
        topics=topics,
        health=around.health,
        clock=around.clock,
        observers=observers,
    )
    link: LinkClient | None = None
    if config.link is None:
        journal = Journal(writer=writer)
    else:  # a table with linked meters (docs/link.md)
        outbox = LinkOutbox(config.params, config.link.id, config.mqtt.prefix)
        queued = asyncio.Event()
        journal = Journal(writer=writer, link=LinkSide(outbox, queued.set))
        link = LinkClient(
            journal=journal,
            config=config,
            link=config.link,
            session=around.session,
            outbox=outbox,
            queued=queued,
            meters=linked,
            changed=outputs.redraw,
        )
    printing = _printing(config, journal, metrics)
    board_input = BoardInput(
        journal=journal,
        outputs=outputs,
        driver=around.driver,
        health=around.health,
        notify=around.notify,
    )
    if metrics is not None:
        view = MetricsView(
            current=current,
            health=around.health,
            driver=around.driver,
            version=around.version,
            hits=hits,
            link=link.status if link is not None else None,
        )
        metrics.collect(view)
    archive = None if config.archive is None else archive_feed(config, around, current)
    if archive is not None and metrics is not None:
        metrics.registry.register(ArchiveCollector(table_id, archive))
    return OpenTable(
        current=current,
        writer=writer,
        journal=journal,
        hits=hits,
        publisher=publisher,
        outputs=outputs,
        board_input=board_input,
        link=link,
        metrics=metrics,
        archive=archive,
        printing=printing,
    )


def archive_feed(config: DaemonConfig, around: Surroundings, current: CurrentTable) -> ArchiveFeed:
    """The table's side of the archive, on the table's one broker session (docs/archive.md)."""
    section = config.archive
    assert section is not None

    def note(reason: str) -> None:
        around.health.archive = reason

    return ArchiveFeed(
        session=around.session,
        prefix=config.mqtt.prefix,
        table_id=config.params.table_id,
        ledger_path=config.ledger.path,
        head_seq=lambda: current.head_seq,
        max_lag_rows=section.max_lag_rows,
        max_lag_s=section.max_lag_s,
        resend_s=section.resend_s,
        note=note,
    )


def _printing(
    config: DaemonConfig, journal: Journal, metrics: TableMetrics | None
) -> SlipPrinting | None:
    """The slip printer's queue, on a table with ``[slips.printer]`` (docs/slips.md)."""
    section = config.slips.printer
    if not config.slips.enabled or section is None:
        return None
    printer: EscposPrinter
    if section.device is not None:
        printer = SerialPrinter(
            section.device, section.baudrate, timeout_s=section.timeout_s,
            status=section.status, dsrdtr=section.dsrdtr,
        )  # fmt: skip
    else:
        assert section.host is not None  # the section's validator: one of the two
        printer = NetworkPrinter(
            section.host, section.port, timeout_s=section.timeout_s, status=section.status
        )
    printing = SlipPrinting(journal, printer, retry_s=section.retry_s)
    if metrics is not None:
        metrics.registry.register(SlipsCollector(config.params.table_id, printing.status))
    return printing
