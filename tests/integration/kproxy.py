"""kproxy.py — a logging TCP proxy for the Kafka protocol (a debugging aid, not a test).

    /usr/bin/python3 tests/integration/kproxy.py LISTEN_PORT UPSTREAM_HOST:PORT

Forwards bytes both ways unchanged and prints one line per request frame: connection,
api_key (name), api_version, correlation id, client id. Point a client's bootstrap at it to
see what that client sends first and which versions it asks for.
"""

import socket
import struct
import sys
import threading

NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
         9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
         13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
         17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
         21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
         32: "DescribeConfigs", 33: "AlterConfigs", 37: "CreatePartitions", 42: "DeleteGroups",
         44: "IncrementalAlterConfigs", 47: "OffsetDelete", 60: "DescribeCluster",
         68: "ConsumerGroupHeartbeat"}


def pump(src, dst, conn_id, log):
    buf = b""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
            if log:
                buf += data
                while len(buf) >= 4:
                    (n,) = struct.unpack(">i", buf[:4])
                    if n < 0 or len(buf) < 4 + n:
                        break
                    f = buf[4:4 + n]
                    buf = buf[4 + n:]
                    if len(f) >= 10:
                        k, v, c, cl = struct.unpack(">hhih", f[:10])
                        cid = f[10:10 + cl].decode(errors="replace") if cl > 0 else None
                        print("conn %d: %s(%d) v%d corr=%d client=%s"
                              % (conn_id, NAMES.get(k, "?"), k, v, c, cid), flush=True)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    port = int(sys.argv[1])
    host, uport = sys.argv[2].rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    n = 0
    while True:
        c, _ = ls.accept()
        n += 1
        u = socket.create_connection((host, int(uport)))
        threading.Thread(target=pump, args=(c, u, n, True), daemon=True).start()
        threading.Thread(target=pump, args=(u, c, n, False), daemon=True).start()


if __name__ == "__main__":
    main()
