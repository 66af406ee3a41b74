"""The round's RPCs on one asyncio event loop (grpc.aio), every switch's call in flight at once.

The controller's rounds send one serialised ReadRequest (counter reads) or WriteRequest per
switch. With grpc's synchronous API each call in flight costs a future, a callback thread
hand-off and the GIL round trips that go with it; on grpc.aio the calls of a round are
coroutines gathered on one loop thread, which costs less client CPU per call (`make
bench-scale`, "io" rows: 0.75-0.85x the futures' CPU per call on this machine). The
connection that arbitrates (the StreamChannel), pushes pipelines and reads switches back stays
the synchronous client's (:class:`coflow.dataplane.p4rt.P4RuntimeClient`); the loop holds a
second channel per switch for the round's traffic (created on first use, replaced when the
switch's client reconnects).

Results and errors come back as the synchronous path's do: lists of serialised responses,
or :class:`~coflow.dataplane.p4rt.P4RuntimeError` with the per-update details of a failed
Write.
"""
from __future__ import annotations

import asyncio
import threading

from ..dataplane.p4rt import P4RuntimeClient, P4RuntimeError


def call_timeout(kind: str, n: int) -> float:
    """The deadline of each of ``n`` calls sent together: a read 2 s (as the synchronous
    path's), plus 5 ms per call in flight (a thousand switches' answers queue behind each
    other on a small controller); a Write 30 s (a first push of a whole table)."""
    return (2.0 if kind == "read" else 30.0) + 0.005 * n


class RoundIO:
    CHANNEL_OPTIONS = P4RuntimeClient.CHANNEL_OPTIONS

    def __init__(self, tls=None) -> None:
        self.tls = tls      # coflow.dataplane.p4rt.ChannelTls of every switch (None: plaintext)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._chans: dict = {}  # name -> (key, channel, read method, write method)
        self._mu = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._mu:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                t = threading.Thread(target=loop.run_forever, daemon=True, name="ctl-aio")
                t.start()
                self._loop, self._thread = loop, t
            return self._loop

    def _methods(self, name: str, address: str, key):
        """(read, write) multi-callables on the loop's channel to ``address`` (loop thread)."""
        import grpc
        got = self._chans.get(name)
        if got is None or got[0] != key:
            if got is not None:
                asyncio.ensure_future(got[1].close())
            if self.tls is not None:
                ch = self.tls.channel(address, list(self.CHANNEL_OPTIONS), aio=True)
            else:
                ch = grpc.aio.insecure_channel(address, options=list(self.CHANNEL_OPTIONS))
            got = self._chans[name] = (key, ch, ch.unary_stream("/p4.v1.P4Runtime/Read"),
                                       ch.unary_unary("/p4.v1.P4Runtime/Write"))
        return got[2], got[3]

    @staticmethod
    async def _read(method, req: bytes, timeout: float):
        import grpc
        try:
            return [r async for r in method(req, timeout=timeout)]
        except grpc.RpcError as err:
            return P4RuntimeError(f"Read failed: {err.code().name}: {err.details()}",
                                  code=err.code().name)

    @staticmethod
    async def _write(method, req: bytes, timeout: float):
        import grpc
        try:
            await method(req, timeout=timeout)
            return None
        except grpc.RpcError as err:
            return P4RuntimeError(f"Write failed: {err.code().name}: {err.details()}",
                                  P4RuntimeClient._details(err), code=err.code().name)

    async def _gather(self, kind: str, items, timeout: float):
        calls = []
        for name, address, key, req in items:
            read, write = self._methods(name, address, key)
            calls.append(self._read(read, req, timeout) if kind == "read" else
                         self._write(write, req, timeout))
        return await asyncio.gather(*calls)

    def run(self, kind: str, items, timeout: float | None = None) -> list:
        """``items``: [(switch name, address, connection key, serialised request)], all sent
        together; returns, in the same order, the serialised responses (``kind="read"``) or
        None (``"write"``), or the :class:`P4RuntimeError` of a call that failed. ``key``
        names the switch's current connection: a new key replaces the channel."""
        if not items:
            return []
        if timeout is None:
            timeout = call_timeout(kind, len(items))
        loop = self._ensure()
        fut = asyncio.run_coroutine_threadsafe(self._gather(kind, items, timeout), loop)
        return fut.result(timeout + 5.0)

    def close(self) -> None:
        with self._mu:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def shut():
            for _, ch, _, _ in self._chans.values():
                await ch.close()
            self._chans.clear()
        try:
            asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        # not loop.close(): grpc's poller thread may still post to it (harmless once stopped)
