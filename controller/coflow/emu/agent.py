"""Traffic agent: runs on one emulated host, sends and receives the trace's flows over TCP.

    python -m coflow.emu.agent --host h3 --listen 10.0.0.4:5001

Protocol with the driver (the jobs' master, :mod:`coflow.emu.runner`): JSON lines.

driver -> agent (stdin)::

    {"op": "send", "run": R, "coflow": k, "flow": i, "cid": "7.0", "dst": "10.0.0.2",
     "port": 5001, "bytes": n}       open one TCP connection tagged with CoflowId 7.0 and send
                                     n payload bytes to dst:port now; with "reuse": true take an
                                     idle connection to dst:port from the pool instead (tagged
                                     for this flow, back in the pool when the receiver acks);
                                     with "wait": true too, a flow that finds every pooled
                                     connection of the pair busy waits for one (oldest first)
                                     instead of opening another
    {"op": "warm", "dst": "10.0.0.2", "port": 5001, "count": c}
                                     open c idle connections to dst:port for later flows (the
                                     shuffle services of Hadoop and Spark keep theirs open), and
                                     answer {"ev": "warm", "dst": ..., "count": opened}
    {"op": "watch", "api": "unix:/run/api.sock"}
                                     follow the controller's rates for this host's flows
                                     (the coflow API's WatchRates stream, across controller
                                     restarts) and pace every flow at its rate (:class:`Pacer`,
                                     in the agent, as Varys's client paced at the application
                                     layer); "api": "" stops (flows unpaced again).
                                     Answered by {"ev": "watching",
                                     "controller": id} whenever a stream (re)starts
    {"op": "ping", "seq": s}         answered by {"ev": "pong", "seq": s}
    {"op": "mark"}                   answered by {"ev": "mark", "tcp": {...}}: the host's TCP
                                     counters since the previous mark or reset, which restart
                                     from here (the warm-up's own, before a mode's clock starts)
    {"op": "reset"}                  abort every connection in progress and close the pool (end of a mode),
                                     answered by {"ev": "reset", "cancelled": n, "tcp": {...}}
                                     with the host's TCP counters since the previous reset or mark
                                     (:data:`TCP_COUNTERS`: SYN retransmissions, listen-queue
                                     overflows, timeouts, ...)
    {"op": "quit"}                   (or EOF) close everything and exit

agent -> driver (stdout)::

    {"ev": "ready", "host": h, "port": p}
    {"ev": "done", "run": R, "coflow": k, "flow": i, "bytes": n, "t": T, "src": ip}
                                     receiver side: all n payload bytes of the flow arrived at T
                                     (time.time(); every namespace shares the clock)
    {"ev": "sent", "run": R, "coflow": k, "flow": i, "t_start": T0, "t_conn": Tc, "t_end": T1,
     "tag": "option", "pace": r}     sender side: started at T0, connected at Tc, the receiver
                                     closed (every byte acknowledged) at T1; paced at r payload
                                     bytes/s when it started (null: not paced)
    {"ev": "error", "where": "stdin:3" | "conn ip:port" | "send k.i", "field": f, "message": m}

A malformed line is answered with one ``error`` event naming the line and field; the agent
keeps running. On the wire every flow starts with a 24-byte header (magic ``CFW1``, run,
coflow, flow, payload bytes; network order) and then the payload; the receiver counts payload
bytes only, reports when the header's count has arrived and answers one byte (the flow's ack);
a connection carries flows one after another until the sender closes it. The sender tags its socket with
the CoflowId IPv4 option before ``connect()`` (:func:`coflow.dataplane.packet.set_socket_coflow`):
every data segment carries it, and the fabric's edge switch counts, classifies and stamps it.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys
import time

# imported before the agent reports ready: the module pulls in scapy (about a second), which
# would otherwise delay each host's first flow
from ..dataplane.constants import FRAME_OVERHEAD_BYTES
from ..dataplane.packet import CoflowId, set_socket_coflow

HEADER = struct.Struct("!4sIIIQ")
MAGIC = b"CFW1"
CHUNK = 64 * 1024
_ZEROS = bytes(CHUNK)
MAX_BYTES = 1 << 40
MAX_WARM = 64            # idle connections one warm command may open
ACK = b"\x06"           # the receiver's answer once a flow's last byte arrived
#: ioctl (linux/sockios.h): the bytes of a TCP socket's send queue not sent yet
SIOCOUTQNSD = 0x894B
#: seconds a flow waits for its rate from the controller's stream before it starts unpaced
#: (Register returns once the coflow's state is installed, and the controller publishes the
#: rates before writing them: the stream is normally ahead of the driver's send)
PACE_WAIT_S = 0.3


#: struct tcp_info (linux/tcp.h) up to tcpi_pacing_rate: the fields :func:`tcp_state` reports
_TCP_INFO = struct.Struct("=8B 24I Q")


def tcp_state(sock: socket.socket) -> dict | None:
    """What a (pooled) connection carries into the next flow it sends: the kernel's smoothed RTT
    (ms), congestion window and slow-start threshold (segments), RTO (ms) and its own pacing rate
    (bytes/s; the agent never caps it: it paces in user space); None where TCP_INFO is unavailable."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO.size)
    except OSError:
        return None
    if len(raw) < _TCP_INFO.size:
        return None
    v = _TCP_INFO.unpack(raw)
    u32 = v[8:32]
    return {"rtt_ms": u32[15] / 1000, "cwnd": u32[18], "ssthresh": u32[17],
            "rto_ms": u32[0] / 1000, "backoff": v[4], "pacing_Bps": v[32]}


#: a paced flow writes one segment at a time and may run PACE_BURST_SEGMENTS segments ahead of
#: its rate (Linux's own pacing sends 2-segment bursts at such rates, tcp_min_tso_segs)
PACE_BURST_SEGMENTS = 2
#: frames of a paced flow's start that its meter counts besides the payload: the handshake's
#: two (SYN, ACK) and the header's; charged to its pacer (:meth:`Pacer.charge`) so that its
#: first burst and they fit the meter's bucket of two full frames. A flow on a pooled
#: connection makes no handshake but is charged the same: charged its header alone, the
#: emulation's flows (all pooled) lost more segments to timeouts and SEBF's and HUG's gains
#: fell (docs/experiments/2026-11-28-work-conservation.md, "Ready flows")
START_FRAMES = 3
#: the longest a paced flow sleeps before it looks at its rate again (a rate of 0, a missed wake)
PACE_MAX_SLEEP_S = 1.0


class Pacer:
    """One flow's token bucket at the rate the controller streams for it (payload bytes/s;
    None: unlimited), at most ``burst`` bytes ahead of it. Varys's client throttled its senders
    the same way, at the application layer.

    Linux's own pacing (``SO_MAX_PACING_RATE``) is not used: it charges each segment's time
    after the segment has left (earliest departure time). On a pooled connection, the last
    segments of a slowly paced flow therefore delay the next flow: up to 2 segments at the old
    rate, 2.2 s at 1.3 KB/s. A raised rate also waits for the next ACK. Measured in the
    emulation (make run 8, SEBF): 205 of 1,678 paced flows started on a connection whose kernel
    pacing rate was below half of the flow's rate (mininet/README.md)."""

    def __init__(self, rate: float | None, burst: int, now: float):
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.t = now
        self.wake: asyncio.Future | None = None   # the sender's sleep, cut short by set_rate

    def _fill(self, now: float) -> None:
        if self.rate is not None:
            self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.t) * self.rate)
        self.t = now

    def set_rate(self, rate: float | None, now: float) -> None:
        """A new rate from ``now`` on (the bytes earned so far stay earned)."""
        self._fill(now)
        self.rate = rate
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    def charge(self, n: int, now: float) -> None:
        """``n`` bytes that passed its meter outside the pacer (a flow's handshake and header):
        taken from the tokens, which may go below zero (the next payload waits for them)."""
        self._fill(now)
        if self.rate is not None:
            self.tokens -= n

    def take(self, want: int, now: float) -> float:
        """Take ``want`` bytes (at most ``burst``): 0.0 if they are taken, else the seconds
        until they can be (inf at rate 0)."""
        self._fill(now)
        if self.rate is None:
            return 0.0
        want = min(want, self.burst)
        if self.tokens >= want:
            self.tokens -= want
            return 0.0
        return (want - self.tokens) / self.rate if self.rate > 0 else float("inf")


def unsent_bytes(sock: socket.socket) -> int:
    """The bytes of ``sock``'s send queue that TCP has not sent yet (a window-limited flow's
    backlog); 0 where the kernel does not say."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), SIOCOUTQNSD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def segment_size(sock: socket.socket) -> int:
    """The connection's MSS (a paced flow's write quantum)."""
    try:
        mss = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    except OSError:
        mss = 0
    return mss if 64 <= mss <= CHUNK else 1448


#: Kernel TCP counters (the namespace's /proc/net/netstat TcpExt and /proc/net/snmp Tcp) that
#: say where a flow's time went: a SYN or SYN-ACK retransmitted costs the initial RTO (1 s), a
#: full accept queue drops SYNs, a timeout stalls a flow for an RTO.
#: TCPDSACKRecvSegs: retransmitted segments the receiver already had (D-SACK), i.e. sent again
#: without a loss (a timeout of a flow that waited, not dropped); TCPSpuriousRTOs: timeouts
#: F-RTO found spurious.
TCP_COUNTERS = ("TCPSynRetrans", "ListenOverflows", "ListenDrops", "TCPTimeouts", "TCPLossProbes",
                "TCPFastRetrans", "RetransSegs", "OutSegs", "ActiveOpens", "PassiveOpens",
                "TCPDSACKRecvSegs", "TCPSpuriousRTOs")


def tcp_counters(root: str = "/proc/net") -> dict[str, int]:
    """The :data:`TCP_COUNTERS` of this network namespace ({} where /proc is unreadable)."""
    out: dict[str, int] = {}
    for name in ("netstat", "snmp"):
        try:
            with open(os.path.join(root, name)) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for head, vals in zip(lines[::2], lines[1::2]):
            hk, _, hv = head.partition(":")
            vk, _, vv = vals.partition(":")
            if hk != vk or hk not in ("TcpExt", "Tcp"):
                continue
            for k, v in zip(hv.split(), vv.split()):
                if k in TCP_COUNTERS:
                    try:
                        out[k] = int(v)
                    except ValueError:
                        pass
    return out


class MessageError(ValueError):
    def __init__(self, fieldname: str, problem: str):
        self.field = fieldname
        super().__init__(f"{fieldname}: {problem}")


def _int(msg: dict, key: str, lo: int = 0, hi: int = (1 << 32) - 1) -> int:
    if key not in msg:
        raise MessageError(key, "missing")
    v = msg[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise MessageError(key, f"not an integer: {v!r}")
    if not lo <= v <= hi:
        raise MessageError(key, f"{v} outside {lo}..{hi}")
    return v


def parse_command(line: str) -> dict:
    """Validate one driver command; returns it normalised or raises :class:`MessageError`."""
    try:
        msg = json.loads(line)
    except json.JSONDecodeError as e:
        raise MessageError("json", f"invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(msg, dict):
        raise MessageError("json", "not an object")
    op = msg.get("op")
    if op == "send":
        cid = msg.get("cid")
        if not isinstance(cid, str):
            raise MessageError("cid", f"not a string: {cid!r}")
        try:
            ext, dot, internal = cid.partition(".")
            if not dot or not ext.isdigit() or not internal.isdigit():
                raise ValueError(f"expected 'external.internal', got {cid!r}")
            CoflowId(int(ext), int(internal))
        except ValueError as e:
            raise MessageError("cid", str(e)) from None
        dst = msg.get("dst")
        try:
            ipaddress.IPv4Address(dst)
        except (ipaddress.AddressValueError, ValueError):
            raise MessageError("dst", f"not an IPv4 address: {dst!r}") from None
        reuse = msg.get("reuse", False)
        if not isinstance(reuse, bool):
            raise MessageError("reuse", f"not a boolean: {reuse!r}")
        wait = msg.get("wait", False)
        if not isinstance(wait, bool):
            raise MessageError("wait", f"not a boolean: {wait!r}")
        return {"op": "send", "run": _int(msg, "run"), "coflow": _int(msg, "coflow"),
                "flow": _int(msg, "flow"), "cid": cid, "dst": dst,
                "port": _int(msg, "port", 1, 65535), "bytes": _int(msg, "bytes", 0, MAX_BYTES),
                "reuse": reuse, "wait": wait}
    if op == "warm":
        dst = msg.get("dst")
        try:
            ipaddress.IPv4Address(dst)
        except (ipaddress.AddressValueError, ValueError):
            raise MessageError("dst", f"not an IPv4 address: {dst!r}") from None
        return {"op": "warm", "dst": dst, "port": _int(msg, "port", 1, 65535),
                "count": _int(msg, "count", 1, MAX_WARM)}
    if op == "watch":
        api = msg.get("api")
        if not isinstance(api, str):
            raise MessageError("api", f"not a string: {api!r}")
        if api and not api.startswith("unix:") and ":" not in api:
            raise MessageError("api", f"not an API address ('unix:/path' or 'host:port', '' = stop): {api!r}")
        return {"op": "watch", "api": api}
    if op == "ping":
        return {"op": "ping", "seq": _int(msg, "seq")}
    if op in ("quit", "reset", "mark"):
        return {"op": op}
    raise MessageError("op", f"unknown operation {op!r} (send, warm, watch, ping, mark, reset, quit)")


def parse_header(data: bytes) -> tuple[int, int, int, int]:
    """(run, coflow, flow, bytes) from a flow's first 24 bytes; ValueError if not ours."""
    if len(data) != HEADER.size:
        raise ValueError(f"header: {len(data)} bytes, need {HEADER.size}")
    magic, run, coflow, flow, nbytes = HEADER.unpack(data)
    if magic != MAGIC:
        raise ValueError(f"header: bad magic {magic!r}")
    if nbytes > MAX_BYTES:
        raise ValueError(f"header: {nbytes} bytes is more than {MAX_BYTES}")
    return run, coflow, flow, nbytes


class Agent:
    def __init__(self, host: str, listen_ip: str, port: int, out=None, tag: bool = True,
                 cc: str | None = "cubic"):
        self.host, self.listen_ip, self.port = host, listen_ip, port
        self.cc = cc
        self.out = out or sys.stdout
        self.tag = tag
        self.tasks: set[asyncio.Task] = set()
        self.idle: dict[tuple[str, int], list] = {}   # (dst, port) -> idle pooled connections
        self.pooled: dict[tuple[str, int], int] = {}  # (dst, port) -> live pooled connections
        self.waiting: dict[tuple[str, int], collections.deque] = {}  # flows waiting for one
        self.server = None
        # pacing at the controller's rates (op "watch")
        self.watcher = None                  # coflow.api.client.RateWatcher
        self.controller: str | None = None   # the controller whose rates we hold
        self.rates: dict[tuple[str, int], float | None] = {}   # (cid, flow) -> B/s (None: unlimited)
        self.pacing: dict[tuple[str, int], Pacer] = {}  # flows in progress, paced
        # per paced flow: (the lowest rate it was paced at while sending, the last one); None
        # = unpaced (reported with its "sent" event: where a slow flow's time went)
        self.pace_range: dict[tuple[str, int], tuple] = {}
        self.rate_waiters: dict[tuple[str, int], list] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    def emit(self, **ev) -> None:
        self.out.write(json.dumps(ev, separators=(",", ":")) + "\n")
        self.out.flush()

    # receiver ---------------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Flows one after another on this connection until the sender closes it: header,
        payload, then one ack byte back."""
        me = asyncio.current_task()
        if me is not None:
            self.tasks.add(me)
            me.add_done_callback(self.tasks.discard)
        peer = writer.get_extra_info("peername")
        where = f"conn {peer[0]}:{peer[1]}" if peer else "conn"
        try:
            while True:
                try:
                    head = await reader.readexactly(HEADER.size)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        self.emit(ev="error", where=where, field="header",
                                  message=f"connection closed after {len(e.partial)} header bytes")
                    return                   # closed between flows: the sender is done with it
                run, coflow, flow, nbytes = parse_header(head)
                got = 0
                while got < nbytes:
                    chunk = await reader.read(min(CHUNK * 4, nbytes - got))
                    if not chunk:
                        break
                    got += len(chunk)
                t = time.time()
                if got < nbytes:
                    self.emit(ev="error", where=where, field="bytes",
                              message=f"flow {coflow}.{flow}: connection closed after {got} of {nbytes} bytes")
                    return
                self.emit(ev="done", run=run, coflow=coflow, flow=flow, bytes=got, t=t,
                          src=peer[0] if peer else None)
                writer.write(ACK)
                await writer.drain()
        except ValueError as e:
            self.emit(ev="error", where=where, field="header", message=str(e))
        except OSError as e:
            self.emit(ev="error", where=where, field="socket", message=str(e))
        except asyncio.CancelledError:
            writer.transport.abort()
            raise
        finally:
            writer.close()

    # sender ---------------------------------------------------------------------------------------
    async def _connect(self, dst: str, port: int, cid: str | None):
        """A new connection (tagged with ``cid`` before connect() when tagging)."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            how = "none"
            if self.tag and cid is not None:
                how = set_socket_coflow(sock, CoflowId.parse(cid))
            self._set_cc(sock)
            sock.setblocking(False)
            await loop.sock_connect(sock, (dst, port))
            reader, writer = await asyncio.open_connection(sock=sock)
        except BaseException:
            sock.close()
            raise
        return reader, writer, how

    async def warm(self, cmd: dict) -> None:
        """Open idle connections to ``dst:port`` for later ``reuse`` sends."""
        key = (cmd["dst"], cmd["port"])
        opened = 0
        try:
            for _ in range(cmd["count"]):
                reader, writer, _how = await self._connect(cmd["dst"], cmd["port"], None)
                self.idle.setdefault(key, []).append((reader, writer))
                self.pooled[key] = self.pooled.get(key, 0) + 1
                opened += 1
        except (OSError, RuntimeError, ValueError) as e:
            self.emit(ev="error", where=f"warm {cmd['dst']}:{cmd['port']}", field="socket", message=str(e))
        self.emit(ev="warm", dst=cmd["dst"], port=cmd["port"], count=opened, t=time.time())

    async def send(self, cmd: dict) -> None:
        where = f"send {cmd['coflow']}.{cmd['flow']}"
        t0 = time.time()
        key = (cmd["dst"], cmd["port"])
        reuse = cmd.get("reuse", False)
        conn = None
        try:
            idle = self.idle.get(key) if reuse else None
            if reuse and not idle and cmd.get("wait") and self.pooled.get(key, 0) > 0:
                # every pooled connection of the pair is busy: wait for one (a shuffle
                # service's bounded fetches per host) instead of opening another
                fut = asyncio.get_running_loop().create_future()
                self.waiting.setdefault(key, collections.deque()).append(fut)
                got = await fut
                if got is not None:
                    idle = [got]
            if idle:
                reader, writer = idle.pop()
                conn = (reader, writer)
                how = "none"
                if self.tag:
                    # a connected TCP socket takes new IP options for its next segments
                    how = set_socket_coflow(writer.get_extra_info("socket"), CoflowId.parse(cmd["cid"]))
            else:
                reader, writer, how = await self._connect(cmd["dst"], cmd["port"], cmd["cid"])
                conn = (reader, writer)
                if reuse:
                    self.pooled[key] = self.pooled.get(key, 0) + 1
            t_conn = time.time()
            pace = None
            sock = writer.get_extra_info("socket")
            if self.watcher is not None:
                pace = await self._pace(sock, (cmd["cid"], cmd["flow"]))
            tcp0 = tcp_state(sock)
            writer.write(HEADER.pack(MAGIC, cmd["run"], cmd["coflow"], cmd["flow"], cmd["bytes"]))
            pacer = self.pacing.get((cmd["cid"], cmd["flow"]))
            if pacer is not None:
                pacer.charge(HEADER.size + START_FRAMES * FRAME_OVERHEAD_BYTES,
                             asyncio.get_running_loop().time())
            await self._payload(writer, sock, cmd["bytes"], self.pacing.get((cmd["cid"], cmd["flow"])))
            if reuse:
                if await reader.readexactly(len(ACK)) != ACK:
                    raise ValueError("bad ack")
                self.pacing.pop((cmd["cid"], cmd["flow"]), None)   # no state on the connection
                self._release(key, conn)     # to a waiting flow, or back in the pool
                conn = None
            else:
                self.pacing.pop((cmd["cid"], cmd["flow"]), None)
                writer.write_eof()
                try:
                    await reader.read()      # the ack, then the receiver's close
                except ConnectionResetError:
                    pass                     # it closed first: every byte was acknowledged already
                writer.close()
                conn = None
            lo, last = self.pace_range.pop((cmd["cid"], cmd["flow"]), (pace, pace))
            self.emit(ev="sent", run=cmd["run"], coflow=cmd["coflow"], flow=cmd["flow"],
                      t_start=t0, t_conn=t_conn, t_end=time.time(), tag=how, pace=pace,
                      pace_min=lo, pace_last=last, tcp0=tcp0)
        except asyncio.CancelledError:
            self.pacing.pop((cmd["cid"], cmd["flow"]), None)
            if conn is not None:
                conn[1].transport.abort()
                if reuse:
                    self._lost(key)
            raise
        except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as e:
            self.pacing.pop((cmd["cid"], cmd["flow"]), None)
            if conn is not None:
                conn[1].transport.abort()
                if reuse:
                    self._lost(key)
            self.emit(ev="error", where=where, field="socket", message=f"{cmd['dst']}:{cmd['port']}: {e}")

    # pacing ---------------------------------------------------------------------------------------
    async def _payload(self, writer, sock, nbytes: int, pacer: Pacer | None) -> None:
        """Write a flow's ``nbytes``: at full speed, or with a ``pacer`` one segment at a time
        at its current rate, and only while TCP has sent what it was given (a window-limited
        flow builds no backlog that it would later send at line rate, past its meter)."""
        loop = asyncio.get_running_loop()
        seg = segment_size(sock) if pacer is not None else CHUNK
        left = nbytes
        while left > 0:
            if pacer is None or pacer.rate is None:
                n = min(CHUNK, left)
            else:
                n = min(seg, left)
                if writer.transport.get_write_buffer_size() + unsent_bytes(sock) > seg:
                    wait = n / pacer.rate if pacer.rate > 0 else PACE_MAX_SLEEP_S
                else:
                    wait = pacer.take(n, loop.time())
                if wait > 0:
                    await self._sleep(pacer, min(wait, PACE_MAX_SLEEP_S))
                    continue
            writer.write(_ZEROS[:n])
            left -= n
            await writer.drain()
        await writer.drain()

    @staticmethod
    async def _sleep(pacer: Pacer, delay: float) -> None:
        """Sleep ``delay`` s, or until the flow's rate changes."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        pacer.wake = fut
        timer = loop.call_later(delay, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            pacer.wake = None

    async def _pace(self, sock, key) -> float | None:
        """A flow's pacer at its rate (waiting up to PACE_WAIT_S for the controller's stream to
        name it); returns the rate (None: unpaced)."""
        if key not in self.rates:
            fut = asyncio.get_running_loop().create_future()
            self.rate_waiters.setdefault(key, []).append(fut)
            try:
                await asyncio.wait_for(fut, PACE_WAIT_S)
            except asyncio.TimeoutError:
                pass
        rate = self.rates.get(key)
        self.pacing[key] = Pacer(rate, PACE_BURST_SEGMENTS * segment_size(sock),
                                 asyncio.get_running_loop().time())
        self.pace_range[key] = (rate, rate)
        return rate

    def _on_rates(self, u: dict) -> None:
        """One update of the controller's stream (in the event loop)."""
        if not u["coflow_id"]:                 # a (re)started stream: a full snapshot follows
            if u["controller"] != self.controller:
                self.controller = u["controller"]
                self.rates.clear()
            self.emit(ev="watching", controller=u["controller"])
            return
        cid = u["coflow_id"]
        for k in [k for k in self.rates if k[0] == cid]:
            del self.rates[k]
        if not u["done"]:
            for f in u["flows"]:
                self.rates[(cid, f["flow_id"])] = f["rate_bytes_per_s"] if f["limited"] else None
        now = asyncio.get_running_loop().time()
        for key, pacer in list(self.pacing.items()):
            if key[0] == cid:
                r = self.rates.get(key)
                lo = self.pace_range.get(key, (r, r))[0]
                self.pace_range[key] = (r if lo is None or (r is not None and r < lo) else lo, r)
                pacer.set_rate(r, now)
        for key in [k for k in self.rate_waiters if k[0] == cid and k in self.rates]:
            for fut in self.rate_waiters.pop(key):
                if not fut.done():
                    fut.set_result(None)

    def watch(self, api: str) -> None:
        """Follow the controller's rates at ``api`` ("" = stop; sockets unpaced)."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        now = self.loop.time() if self.loop is not None else 0.0
        for pacer in self.pacing.values():
            pacer.set_rate(None, now)
        self.pacing.clear()
        self.rates.clear()
        self.controller = None
        if not api:
            return
        from ..api.client import RateWatcher
        loop = self.loop

        def err(e):
            loop.call_soon_threadsafe(lambda: self.emit(ev="error", where="rates", field="stream",
                                                        message=str(e)))
        self.watcher = RateWatcher(api, self.host, lambda u: loop.call_soon_threadsafe(self._on_rates, u),
                                   err).start()

    def _release(self, key, conn) -> None:
        """A pooled connection is free: the oldest flow waiting for the pair takes it, else it
        goes back to the pool."""
        q = self.waiting.get(key)
        while q:
            fut = q.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        self.idle.setdefault(key, []).append(conn)

    def _lost(self, key) -> None:
        """A pooled connection broke: with none left for the pair, waiting flows open their own."""
        self.pooled[key] = max(0, self.pooled.get(key, 0) - 1)
        if self.pooled[key] == 0:
            for fut in self.waiting.pop(key, ()):
                if not fut.done():
                    fut.set_result(None)

    def close_idle(self) -> int:
        n = 0
        for conns in self.idle.values():
            for _reader, writer in conns:
                writer.transport.abort()
                n += 1
        self.idle.clear()
        self.pooled.clear()
        for q in self.waiting.values():
            for fut in q:
                fut.cancel()
        self.waiting.clear()
        return n

    def _set_cc(self, sock: socket.socket) -> None:
        """Per-socket congestion control: a namespace may only pick algorithms of the machine's
        tcp_allowed_congestion_control by sysctl, but a socket of a CAP_NET_ADMIN process may
        pick any available one."""
        if self.cc:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.cc.encode())

    def _spawn(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    # main -----------------------------------------------------------------------------------------
    async def run(self, stdin=None) -> None:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._set_cc(lsock)                          # accepted sockets inherit it
        lsock.bind((self.listen_ip, self.port))
        lsock.listen(1024)
        self.server = await asyncio.start_server(self._serve, sock=lsock)
        self.loop = asyncio.get_running_loop()
        tcp_base = tcp_counters()
        self.emit(ev="ready", host=self.host, port=self.port)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin or sys.stdin)
        n = 0
        while True:
            line = await reader.readline()
            if not line:
                break
            n += 1
            if not line.strip():
                continue
            try:
                cmd = parse_command(line.decode("utf-8", "replace"))
            except MessageError as e:
                self.emit(ev="error", where=f"stdin:{n}", field=e.field, message=str(e))
                continue
            if cmd["op"] == "quit":
                break
            if cmd["op"] == "ping":
                self.emit(ev="pong", seq=cmd["seq"])
            elif cmd["op"] == "mark":
                now = tcp_counters()
                self.emit(ev="mark", tcp={k: v - tcp_base.get(k, 0) for k, v in now.items()})
                tcp_base = now
            elif cmd["op"] == "reset":
                live = [t for t in self.tasks if not t.done()]
                for t in live:
                    t.cancel()
                self.close_idle()
                now = tcp_counters()
                self.emit(ev="reset", cancelled=len(live),
                          tcp={k: v - tcp_base.get(k, 0) for k, v in now.items()})
                tcp_base = now
            elif cmd["op"] == "warm":
                self._spawn(self.warm(cmd))
            elif cmd["op"] == "watch":
                self.watch(cmd["api"])
            else:
                self._spawn(self.send(cmd))
        self.close_idle()
        if self.watcher is not None:
            self.watcher.stop()
        self.server.close()
        for t in list(self.tasks):
            t.cancel()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="coflow emulation traffic agent (one per host)")
    ap.add_argument("--host", required=True)
    ap.add_argument("--listen", required=True, help="ip:port to receive flows on")
    ap.add_argument("--no-tag", action="store_true", help="do not tag sockets with the CoflowId")
    ap.add_argument("--cc", default="cubic", help="TCP congestion control of every socket ('' = the "
                    "namespace's default)")
    args = ap.parse_args(argv)
    ip, _, port = args.listen.rpartition(":")
    try:
        asyncio.run(Agent(args.host, ip, int(port), tag=not args.no_tag, cc=args.cc or None).run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
