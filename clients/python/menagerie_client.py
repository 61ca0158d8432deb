"""A Menagerie RPC client, written from docs/protocol.md alone (no code shared with the Swift one).

One TCP connection, many calls in flight on it (pipelining), matched to their answers by call id;
unary and server-streaming calls, deadlines (sent as timeout_micros and enforced here too), metadata,
per-call flow control for the responses of streams. Needs python3-protobuf and the modules in
generated/ (clients/python/generate.sh):

    from menagerie_client import Connection
    from menagerie.rpc.v1 import rpc_pb2
    with Connection("127.0.0.1", 7100) as conn:
        health = conn.unary("/menagerie.rpc.v1.Health/Check", rpc_pb2.HealthCheckRequest(),
                            rpc_pb2.HealthCheckResponse, timeout=2)
"""

import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "generated"))

from menagerie.rpc.v1 import rpc_pb2  # noqa: E402  (after the path is set)

HEADER = struct.Struct(">BI")  # flags, length (protocol §2)
MAX_FRAME_SIZE = 16 << 20
MAX_MESSAGE_SIZE = 64 << 20
MAX_OPEN_CALLS = 100  # calls open at once on one connection (protocol §6, the server's default)
INITIAL_WINDOW = 1 << 20
MESSAGE_OVERHEAD = 5
GRANT_THRESHOLD = INITIAL_WINDOW // 2

CODE_NAMES = [
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
]
CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE = 1, 4, 8, 13, 14


class RpcError(Exception):
    """A call that ended with a status other than OK."""

    def __init__(self, code, message):
        super().__init__(f"{code_name(code)}: {message}")
        self.code = code
        self.message = message


def code_name(code):
    return CODE_NAMES[code] if 0 <= code < len(CODE_NAMES) else f"CODE_{code}"


class _Call:
    """What the reader thread delivers to one call: messages, then an end (status or error)."""

    def __init__(self, call_id, method, deadline):
        self.id = call_id
        self.method = method
        self.deadline = deadline  # time.monotonic() value or None
        self.cond = threading.Condition()
        self.messages = []  # complete messages not yet taken
        self.partial = None  # bytearray of a message arriving in chunks
        self.last_message = None
        self.status = None  # (code, message, payload or None)
        self.owed = 0  # credit consumed and not yet granted back

    def wait_for(self, ready):
        """Waits until ready() holds; on the deadline, raises DEADLINE_EXCEEDED."""
        with self.cond:
            while not ready():
                left = None if self.deadline is None else self.deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RpcError(DEADLINE_EXCEEDED, f"no answer to {self.method} before the deadline")
                self.cond.wait(left)


class Connection:
    """One connection to a service replica; thread-safe, calls from many threads share it."""

    def __init__(self, host, port, connect_timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()  # calls, next id, closed, slots
        # Calls the server may still count as open (protocol §6: at most MAX_OPEN_CALLS per connection);
        # a slot is freed by the call's STATUS, its CANCEL, or the end of the connection.
        self.slots = threading.Condition(self.lock)
        self.holding = set()
        self.write_lock = threading.Lock()
        self.calls = {}
        self.next_id = 1  # id 0 names the connection (protocol §4); never reused
        self.closed = None  # (code, message) once the connection is over
        self.reader = threading.Thread(target=self._read_loop, name="menagerie-reader", daemon=True)
        self.reader.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.reader.join(timeout=5)

    # Calls

    def unary(self, method, request, response_type, timeout=None, metadata=None):
        """Sends one request and returns the decoded response; raises RpcError."""
        return self.start_unary(method, request, response_type, timeout, metadata).result()

    def start_unary(self, method, request, response_type, timeout=None, metadata=None):
        """Sends the request now and returns a PendingUnary: calls pipelined on one connection."""
        call = self._start(method, request, timeout, metadata)
        return PendingUnary(self, call, response_type)

    def server_stream(self, method, request, response_type, timeout=None, metadata=None):
        """Sends one request; returns an iterator over the decoded responses (raises RpcError)."""
        call = self._start(method, request, timeout, metadata)
        return self._responses(call, response_type)

    def _start(self, method, request, timeout, metadata):
        with self.lock:
            # Beyond the server's limit a REQUEST would be refused RESOURCE_EXHAUSTED: hold it back until
            # an earlier call ends (the reader thread frees slots, so a single-threaded burst still drains).
            while self.closed is None and len(self.holding) >= MAX_OPEN_CALLS:
                self.slots.wait()
            if self.closed is not None:
                raise RpcError(*self.closed)
            call_id = self.next_id
            self.next_id += 1
            deadline = None if timeout is None else time.monotonic() + timeout
            call = _Call(call_id, method, deadline)
            self.calls[call_id] = call
            self.holding.add(call_id)
        frame = rpc_pb2.Frame(
            call_id=call_id, kind=rpc_pb2.FRAME_KIND_REQUEST, method=method,
            has_payload=True, payload=request.SerializeToString())
        if timeout is not None:
            frame.timeout_micros = max(0, int(timeout * 1_000_000))
        for key, value in (metadata.items() if isinstance(metadata, dict) else metadata or []):
            frame.metadata.add(key=key, value=value)
        self._send(frame)
        return call

    def _responses(self, call, response_type):
        try:
            while True:
                call.wait_for(lambda: call.messages or call.status is not None)
                with call.cond:
                    if call.messages:
                        payload, cost = call.messages.pop(0)
                        call.owed += cost
                        grant = call.owed if call.owed >= GRANT_THRESHOLD else 0
                        if grant:
                            call.owed = 0
                    else:
                        code, message, payload = call.status
                        if code != 0:
                            raise RpcError(code, message)
                        if payload is not None:  # a last message carried by the STATUS frame
                            yield response_type.FromString(payload)
                        return
                if grant:
                    self._send(rpc_pb2.Frame(call_id=call.id, kind=rpc_pb2.FRAME_KIND_WINDOW_UPDATE,
                                             window_increment=grant))
                yield response_type.FromString(payload)
        except RpcError as error:
            if error.code == DEADLINE_EXCEEDED:
                self.cancel(call)
            raise
        except GeneratorExit:
            self.cancel(call)  # the caller stopped reading: tell the server
            raise
        finally:
            with self.lock:
                self.calls.pop(call.id, None)

    def cancel(self, call):
        """Gives up on a call: fails it here and sends CANCEL (protocol §5)."""
        with self.lock:
            open_here = self.calls.pop(call.id, None) is not None
            self._free_slot(call.id)
        with call.cond:
            if call.status is None:
                call.status = (CANCELLED, f"call to {call.method} was cancelled", None)
            call.cond.notify_all()
        if open_here and self.closed is None:
            try:
                self._send(rpc_pb2.Frame(call_id=call.id, kind=rpc_pb2.FRAME_KIND_CANCEL))
            except RpcError:
                pass

    def _free_slot(self, call_id):
        """Ends `call_id`'s claim on one of the server's open-call slots (self.lock held)."""
        if call_id in self.holding:
            self.holding.discard(call_id)
            self.slots.notify()

    # Wire

    def _send(self, frame):
        envelope = frame.SerializeToString()
        data = HEADER.pack(0, len(envelope)) + envelope
        with self.write_lock:
            try:
                self.sock.sendall(data)
            except OSError as error:
                raise RpcError(UNAVAILABLE, f"connection lost: {error}") from None

    def _read_exactly(self, count):
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(min(count - len(chunks), 1 << 20))
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def _read_loop(self):
        reason = (UNAVAILABLE, "connection lost: the server closed the connection")
        try:
            while True:
                header = self._read_exactly(HEADER.size)
                if header is None:
                    break
                flags, length = HEADER.unpack(header)
                if flags != 0 or length == 0 or length > MAX_FRAME_SIZE:
                    reason = (UNAVAILABLE, f"bad frame header from the server (flags {flags}, length {length})")
                    break
                envelope = self._read_exactly(length)
                if envelope is None:
                    break
                frame = rpc_pb2.Frame.FromString(envelope)
                if frame.kind == rpc_pb2.FRAME_KIND_STATUS and frame.call_id == 0:
                    # The server says why it closes the connection (protocol §7).
                    reason = (frame.status_code, frame.status_message)
                    break
                if not self._dispatch(frame):
                    reason = (UNAVAILABLE, f"unexpected frame of kind {frame.kind} from the server")
                    break
        except OSError as error:
            reason = (UNAVAILABLE, f"connection lost: {error}")
        except Exception as error:  # an envelope that does not decode
            reason = (UNAVAILABLE, f"protocol error from the server: {error}")
        with self.lock:
            self.closed = reason
            calls, self.calls = list(self.calls.values()), {}
            self.holding.clear()
            self.slots.notify_all()
        for call in calls:
            with call.cond:
                if call.status is None:
                    call.status = (reason[0], reason[1], None)
                call.cond.notify_all()
        try:
            self.sock.close()
        except OSError:
            pass

    def _dispatch(self, frame):
        """Hands a frame to its call; False for a frame the server must not send."""
        with self.lock:
            call = self.calls.get(frame.call_id)
        if frame.kind == rpc_pb2.FRAME_KIND_MESSAGE:
            if call is None:
                return True  # a call we cancelled or that timed out: ignored
            chunk_grant = 0
            with call.cond:
                cost = len(frame.payload) + MESSAGE_OVERHEAD
                if call.partial is not None:
                    call.partial += frame.payload
                else:
                    call.partial = bytearray(frame.payload)
                if len(call.partial) > MAX_MESSAGE_SIZE:
                    too_large = True
                else:
                    too_large = False
                    if frame.continues:
                        # A chunk is credited back at once (protocol §10): the window does not bound the join.
                        call.owed += cost
                        if call.owed >= GRANT_THRESHOLD:
                            chunk_grant, call.owed = call.owed, 0
                    else:
                        message, call.partial = bytes(call.partial), None
                        call.messages.append((message, cost))
                        call.last_message = message
                        call.cond.notify_all()
            if too_large:
                self.cancel(call)
            elif chunk_grant:
                self._send(rpc_pb2.Frame(call_id=call.id, kind=rpc_pb2.FRAME_KIND_WINDOW_UPDATE,
                                         window_increment=chunk_grant))
            return True
        if frame.kind == rpc_pb2.FRAME_KIND_STATUS:
            with self.lock:
                self._free_slot(frame.call_id)
            if call is not None:
                with call.cond:
                    if call.status is None:
                        call.status = (frame.status_code, frame.status_message,
                                       frame.payload if frame.has_payload else None)
                    call.cond.notify_all()
            return True
        if frame.kind == rpc_pb2.FRAME_KIND_WINDOW_UPDATE:
            return True  # credit for request messages; this client sends none beyond REQUEST
        return False


class PendingUnary:
    """A unary call sent and not yet answered; result() waits for its answer."""

    def __init__(self, connection, call, response_type):
        self.connection = connection
        self.call = call
        self.response_type = response_type
        self.id = call.id

    def result(self):
        call = self.call
        try:
            call.wait_for(lambda: call.status is not None)
        except RpcError:
            self.connection.cancel(call)
            raise
        finally:
            with self.connection.lock:
                self.connection.calls.pop(call.id, None)
        code, message, payload = call.status
        if code != 0:
            raise RpcError(code, message)
        if payload is None:
            payload = call.last_message  # the response may come as a MESSAGE before the STATUS
        if payload is None:
            raise RpcError(INTERNAL, f"the server ended the unary call {call.method} without a response")
        return self.response_type.FromString(payload)
