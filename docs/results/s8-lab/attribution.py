#!/usr/bin/env python3
"""Where S8's victim loses: per phase of one mrc-lab s08-incast run (a variant's
folder with samples.jsonl), the victim's QP counters (h7) and the marks of the
switch ports on its path, so that its ECN echoes can be attributed to the one
port it does not share (its own downlink p0-t0-1:d1) or to the ones it shares
with the spread/incast flows (T0 0's uplink p0-t0-0:u0, T1 -> T0 1 p0-t1-0:d1).

    python3 docs/results/s8-lab/attribution.py RUN/s08-incast/mrc

Time zero is found as mrc-lab finds it: the first sample by which the victim's
destination downlink (p0-t0-1:d1) sent 64 KiB. Windows are the scenario's.
"""
import json
import statistics
import sys

WINDOWS = [("paced", 2.5, 5.5), ("incast", 9.5, 12.5), ("paced again", 16.5, 19.5), ("alone", 23.5, 26.5)]
PORTS = [("own downlink p0-t0-1:d1", "p0-t0-1:d1"),
         ("shared T0 0 uplink p0-t0-0:u0", "p0-t0-0:u0"),
         ("shared T1->T0 1 p0-t1-0:d1", "p0-t1-0:d1"),
         ("incast downlink p0-t0-1:d0", "p0-t0-1:d0")]
QP = ["acked_bytes", "ecn_echoes", "timeouts", "rtx_pkts", "trims", "rx_nack", "losses"]


def main(folder):
    sw, qp = {}, []
    for line in open(folder + "/samples.jsonl"):
        s = json.loads(line)
        if s["kind"] == "swport":
            sw.setdefault(s["src"] + ":" + s["id"], []).append((s["t"], s["v"]))
        elif s["kind"] == "qp" and s["src"] == "h7":
            qp.append((s["t"], s["v"]))
    d1 = sw["p0-t0-1:d1"]
    t0 = next(t for t, v in d1 if v["tx_bytes"] - d1[0][1]["tx_bytes"] >= 64 << 10)

    def at(series, sec):  # the last sample at or before t0 + sec
        x = None
        for t, v in series:
            if t - t0 > sec * 1e9:
                break
            x = v
        return x

    def grow(series, key, a, b):
        return at(series, b)[key] - at(series, a)[key]

    print("phase   | victim goodput | ECN echoes | timeouts (= retransmits) | trims / NACKs / losses | median srtt | " +
          " | ".join("%s CE marks" % n for n, _ in PORTS))
    for name, a, b in WINDOWS:
        g = grow(qp, "acked_bytes", a, b) * 8 / (b - a) / 1e6
        srtt = statistics.median(v["srtt_ns"] for t, v in qp if a * 1e9 <= t - t0 < b * 1e9) / 1e3
        marks = []
        for _, p in PORTS:
            marks.append(str(grow(sw[p], "ecn_marked", a, b)) if p in sw else "not sampled")
        print("%-7s | %.1f Mbit/s | %d | %d (%d) | %d / %d / %d | %.0f us | %s" % (
            name, g, grow(qp, "ecn_echoes", a, b), grow(qp, "timeouts", a, b), grow(qp, "rtx_pkts", a, b),
            grow(qp, "trims", a, b), grow(qp, "rx_nack", a, b), grow(qp, "losses", a, b), srtt, " | ".join(marks)))


if __name__ == "__main__":
    main(sys.argv[1])
