// Python scripts the network attack tests run inside sandboxes as root (sudo): what a hostile
// sandbox user would write.

/**
 * raw.py MODE SRC DST DPORT COUNT PAYLOAD: COUNT raw Ethernet frames out of eth0 with AF_PACKET,
 * to the host end's MAC (the default gateway's, 02:00 + its IPv4 address), carrying UDP to
 * DST:DPORT from SRC. MODE 4: IPv4 ("self" is eth0's address); MODE 6: IPv6 ("ll" is the
 * link-local address of the frame's source or destination MAC). Prints "sent", or "EPERM" when
 * the kernel refuses the socket (no CAP_NET_RAW): then no frame leaves either.
 */
export const RAW_PY = `
import fcntl, socket, struct, sys
def csum(b):
    if len(b) % 2: b += b"\\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return (~s) & 0xffff
def ll(mac):
    e = bytes([mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]])
    return socket.inet_ntop(socket.AF_INET6, bytes([0xfe, 0x80] + [0] * 6) + e)
mode, src, dst, dport, n, payload = sys.argv[1:7]
gw = [l.split() for l in open("/proc/net/route").read().splitlines()[1:] if l.split()[1] == "00000000"][0][2]
gwip = socket.inet_ntoa(struct.pack("<I", int(gw, 16)))
dmac = bytes([2, 0] + [int(x) for x in gwip.split(".")])
smac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
try:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
except PermissionError:
    print("EPERM"); sys.exit(0)
s.bind(("eth0", 0))
data = payload.encode()
if mode == "4":
    if src == "self":
        q = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        src = socket.inet_ntoa(fcntl.ioctl(q.fileno(), 0x8915, struct.pack("256s", b"eth0"))[20:24])
    udp = struct.pack("!HHHH", 40000, int(dport), 8 + len(data), 0) + data
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    frame = dmac + smac + b"\\x08\\x00" + ip + udp
else:
    s6 = socket.inet_pton(socket.AF_INET6, ll(smac) if src == "ll" else src)
    d6 = socket.inet_pton(socket.AF_INET6, ll(dmac) if dst == "ll" else dst)
    udp = struct.pack("!HHHH", 40000, int(dport), 8 + len(data), 0) + data
    c = csum(s6 + d6 + struct.pack("!I3xB", len(udp), 17) + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    frame = dmac + smac + b"\\x86\\xdd" + struct.pack("!IHBB", 6 << 28, len(udp), 17, 255) + s6 + d6 + udp
for i in range(int(n)):
    s.send(frame)
print("sent")
`;

/**
 * dns.py NAME...: one A query per name to the sandbox's resolver (resolv.conf), printing the
 * answer's RCODE for each (-1: no answer); then "burst N": N queries for the first name sent at
 * once, and how many were answered before the answers stopped coming.
 */
export const DNS_PY = `
import random, socket, struct, sys, time
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def query(name, qid):
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
out = {}
for i, name in enumerate(sys.argv[2:]):
    s.sendto(query(name, 1000 + i), (ns, 53))
    try:
        out[name] = s.recv(4096)[3] & 0x0f
    except socket.timeout:
        out[name] = -1
n = int(sys.argv[1])
for i in range(n):
    s.sendto(query(sys.argv[2], 5000 + i), (ns, 53))
got = 0
s.settimeout(2)
try:
    while True:
        s.recv(4096); got += 1
except socket.timeout:
    pass
out["burst"] = got
import json; print(json.dumps(out))
`;

/**
 * keepalive.py HOST: two requests for GET /host on one connection to HOST:80, the first with
 * Host HOST and the second with Host other.test, each written once the previous answer is read;
 * then the same two pipelined in one write. Prints what came back each time ("closed" for none).
 */
export const KEEPALIVE_PY = `
import json, socket, sys
host = sys.argv[1]
def req(h): return ("GET /host HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % h).encode()
def answer(c):
    buf = b""
    while b"\\r\\n\\r\\n" not in buf:
        d = c.recv(4096)
        if not d: return "closed"
        buf += d
    head, body = buf.split(b"\\r\\n\\r\\n", 1)
    n = int([l.split(b":")[1] for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        d = c.recv(4096)
        if not d: break
        body += d
    return body.decode()
out = {}
c = socket.create_connection((host, 80), timeout=10)
c.sendall(req(host)); out["first"] = answer(c)
try:
    c.sendall(req("other.test")); out["second"] = answer(c)
except OSError:
    out["second"] = "closed"
c = socket.create_connection((host, 80), timeout=10)
c.sendall(req(host) + req("other.test"))
rest = b""
try:
    while True:
        d = c.recv(4096)
        if not d: break
        rest += d
except OSError:
    pass
out["pipelined"] = rest.decode("latin1")
print(json.dumps(out))
`;

/** tcp6.py PORT: a TCP connection to PORT on the host end's link-local address (from its MAC); prints "open" or "closed <errno>". */
export const TCP6_PY = `
import socket, struct, sys
gw = [l.split() for l in open("/proc/net/route").read().splitlines()[1:] if l.split()[1] == "00000000"][0][2]
mac = bytes([2, 0] + list(struct.pack("<I", int(gw, 16))))
e = bytes([mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]])
addr = socket.inet_ntop(socket.AF_INET6, bytes([0xfe, 0x80] + [0] * 6) + e)
try:
    socket.create_connection((addr + "%eth0", int(sys.argv[1])), timeout=5)
    print("open")
except OSError as x:
    print("closed", x.errno)
`;
