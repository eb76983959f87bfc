"""Training across nodes: one bench per node (srun starts one task on each), meeting at the
first node's address before the process group forms.

torch's TCPStore is the meeting point, at --rendezvous HOST:PORT. The bench on the machine
that holds HOST hosts it and is node 0; every other bench is a client and takes the next node
rank from the store's counter, in the order they arrive. Nothing else tells a bench which node
it is: the container sees neither Slurm's environment nor, under Podman, the node's host name.
Where two "nodes" share one machine (a test cluster's two slurmd), both can bind HOST: the
first to bind the port hosts, the other meets it as a client.

The interface gloo and NCCL use is the one this node reaches HOST by; it is recorded, with
each node's host name and a short all-reduce that measures the bus bandwidth between them
(nccl-tests' busbw = algbw x 2(n-1)/n).
"""
from __future__ import annotations

import datetime
import fcntl
import os
import socket
import struct
import time

import torch

from bench.errors import UnsupportedOption

JOINED = "envbench/nodes/joined"   # the counter that hands out node ranks 1..
HOST_KEY = "envbench/nodes/host/%d"  # each node's host name, for rank 0's record
SIOCGIFADDR = 0x8915  # Linux's ioctl: an interface's IPv4 address
# The all-reduce probe: nccl-tests' large-message end on GPUs; smaller on CPUs, where gloo's
# copies share the cores with nothing else at that moment.
PROBE_BYTES = {"nccl": 64 << 20, "gloo": 8 << 20}
PROBE_REPEATS = 5


class Meeting(object):
    """Where this node's bench stands after the meeting: its node rank, the store every rank
    of the node forms the group through, and the interface it talks over."""

    def __init__(self, store, node_rank, host, port, interface):
        self.store = store
        self.node_rank = node_rank
        self.host = host
        self.port = port
        self.interface = interface


def address_of(host):
    """HOST's address (IPv4 first: gloo's and NCCL's interfaces are named by it)."""
    try:
        infos = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UnsupportedOption("--rendezvous %s: the name does not resolve on this node (%s)"
                                % (host, exc.strerror))
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return infos[0][4][0]


def is_local(address):
    """Whether ``address`` is one of this machine's (a socket can bind it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.bind((address, 0))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def interface_towards(address):
    """The name of the interface this machine reaches ``address`` by (IPv4), or None."""
    if ":" in address:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.connect((address, 9))  # no packet is sent: the kernel only picks the route
        local = udp.getsockname()[0]
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(udp.fileno(), SIOCGIFADDR,
                                     struct.pack("256s", name[:15].encode()))
            except OSError:  # no IPv4 address on this one
                continue
            if socket.inet_ntoa(packed[20:24]) == local:
                return name
    return None


def _store(host, port, hosting, timeout_s):
    timeout = datetime.timedelta(seconds=timeout_s)
    if hosting:
        return torch.distributed.TCPStore(host, port, None, True, timeout,
                                          wait_for_workers=False)
    return torch.distributed.TCPStore(host, port, None, False, timeout)


def client(rendezvous, timeout_s):
    """A client of the store the first node hosts (a node's ranks after its first)."""
    return _store(rendezvous[0], rendezvous[1], False, timeout_s)


def meet(rendezvous, nodes, timeout_s):
    """Join the other nodes' benches at ``rendezvous`` (host, port): a Meeting."""
    host, port = rendezvous
    address = address_of(host)
    store, node_rank, hosting_error = None, None, None
    if is_local(address):
        try:
            store, node_rank = _store(host, port, True, timeout_s), 0
        except (RuntimeError, OSError) as exc:  # another bench here hosts it (or the port
            hosting_error = exc      # is taken: then the client's wait says so)
    if store is None:
        try:
            store = _store(host, port, False, timeout_s)
        except (RuntimeError, OSError) as exc:  # torch 1.x: TimeoutError
            raise UnsupportedOption(
                "the nodes did not meet at %s:%d within %d s: %s%s" % (
                    host, port, timeout_s, str(exc).splitlines()[0][:200],
                    "" if hosting_error is None else " (hosting it here failed: %s)"
                    % str(hosting_error).splitlines()[0][:200]))
        node_rank = int(store.add(JOINED, 1))
        if node_rank >= nodes:
            raise UnsupportedOption("%d benches met at %s:%d for --nodes %d: a task too many "
                                    "(srun --ntasks-per-node=1 --nodes %d)"
                                    % (node_rank + 1, host, port, nodes, nodes))
    store.set(HOST_KEY % node_rank, socket.gethostname())
    interface = interface_towards(address)
    if interface is not None:  # the site's own choice, where it made one, stands
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", interface)
    return Meeting(store, node_rank, host, port, interface)


def met(meeting):
    """How many nodes' benches have met so far (the first, and the clients counted)."""
    return 1 + int(meeting.store.add(JOINED, 0))


def hosts(meeting, nodes):
    """Each node's host name, by node rank (waits for every node to have said it)."""
    return [meeting.store.get(HOST_KEY % rank).decode("utf-8", "replace")
            for rank in range(nodes)]


def bus_bandwidth(world, device):
    """A few all-reduces of PROBE_BYTES across every rank: the median time, and the
    algorithm and bus bandwidths it gives, as nccl-tests reports them (GB/s, 1e9 bytes)."""
    import torch.distributed as dist

    nbytes = PROBE_BYTES[world.backend]
    tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dist.all_reduce(tensor)  # the first sets up the connections: not timed
    seconds = []
    for _ in range(PROBE_REPEATS):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(tensor)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
    median = sorted(seconds)[len(seconds) // 2]
    algbw = nbytes / median / 1e9
    return {"bytes": nbytes, "repeats": PROBE_REPEATS, "median_s": round(median, 6),
            "algbw_gbps": round(algbw, 4),
            "busbw_gbps": round(algbw * 2 * (world.size - 1) / world.size, 4)}
