"""Seeded, reproducible fault plans for the mesh integration tests (test_faults.py).

A plan is a list of faults (process, round, phase, action) plus the WAN it runs on (each city's
one-way delay, bandwidth cap and jitter, and partitions by round). The same seed gives the same
plan, on any machine: everything is drawn from one random.Random(seed), and the plan prints itself
into the test's log so a failing run can be replayed exactly (--seed).

    process  "coordinator" or a node name
    round    R, the round that builds version R
    phase    coordinator: a crash point of src/core/fault_point.h (MESHRL_FAULT=PHASE:ROUND makes it
             SIGKILL itself there); node: "round_open", acted on by the driver as soon as the
             coordinator's ledger shows version R-1
    action   kill       SIGKILL; a node is started again at once, a coordinator resumed (--resume)
             stop_cont  SIGSTOP, then SIGCONT after pause_s (a frozen machine, a long GC pause)
             restart    SIGTERM (a clean stop), then started again

Not a test itself; `python3 fault_plan.py SEED` prints the plans for a seed.
"""
import dataclasses
import random
import sys

# In the order the coordinator meets them within a round (src/core/fault_point.h).
COORDINATOR_PHASES = ["mid_upload", "after_ack", "mid_aggregate", "before_persist", "mid_persist",
                      "before_commit", "after_commit"]
ACTIONS = ["kill", "stop_cont", "restart"]


@dataclasses.dataclass(frozen=True)
class Fault:
    process: str
    round: int
    phase: str
    action: str
    pause_s: float = 0.0

    def __str__(self):
        pause = f" for {self.pause_s:.1f} s" if self.action == "stop_cont" else ""
        return f"round {self.round:3d}  {self.process:12s} {self.phase:15s} {self.action}{pause}"

    def fault_env(self):
        """The coordinator's MESHRL_FAULT value for this fault."""
        assert self.process == "coordinator" and self.phase in COORDINATOR_PHASES, self
        return f"{self.phase}:{self.round}"


@dataclasses.dataclass(frozen=True)
class Link:
    city: str
    rtt_ms: float        # to the coordinator's city
    uplink_mbps: float
    downlink_mbps: float
    jitter_ms: float


@dataclasses.dataclass(frozen=True)
class Partition:
    city: str
    from_round: int      # cut off when round from_round opens
    to_round: int        # healed when round to_round opens


@dataclasses.dataclass
class FaultPlan:
    seed: int
    faults: list
    links: list = dataclasses.field(default_factory=list)
    partitions: list = dataclasses.field(default_factory=list)

    def describe(self):
        lines = [f"fault plan, seed {self.seed}: {len(self.faults)} fault(s), {len(self.links)} link(s), "
                 f"{len(self.partitions)} partition(s)"]
        lines += [f"  link {ln.city}: rtt {ln.rtt_ms:.0f} ms, up {ln.uplink_mbps:.0f} / down {ln.downlink_mbps:.0f} Mbit/s, "
                  f"jitter {ln.jitter_ms:.1f} ms" for ln in self.links]
        lines += [f"  partition {p.city}: rounds {p.from_round}..{p.to_round - 1}" for p in self.partitions]
        lines += ["  " + str(f) for f in self.faults]
        return "\n".join(lines)

    def faults_at(self, round_):
        return [f for f in self.faults if f.round == round_]

    def topology_toml(self, coordinator_city="hub"):
        """A topology file (src/net/topology.h) with the plan's links: the coordinator alone in its
        city, every node city linked to it with the drawn delay and caps."""
        assert self.links, "this plan draws no links"
        cities = [coordinator_city] + [ln.city for ln in self.links]
        out = [f"# Drawn by tests/integration/fault_plan.py, seed {self.seed}.", "version = 1",
               f'coordinator = "{coordinator_city}"', f"seed = {self.seed}", "", f"[cities.{coordinator_city}]",
               "uplink_mbps = 1000", "downlink_mbps = 1000", "jitter_ms = 0"]
        for ln in self.links:
            out += ["", f"[cities.{ln.city}]", f"uplink_mbps = {ln.uplink_mbps:g}", f"downlink_mbps = {ln.downlink_mbps:g}",
                    f"jitter_ms = {ln.jitter_ms:g}"]
        rtt = {ln.city: ln.rtt_ms for ln in self.links}
        out += ["", "[rtt_ms]"]
        for i, a in enumerate(cities):
            for b in cities[i + 1:]:
                # Node-to-node links are unused (every link ends at the coordinator) but the format
                # wants every pair: the sum of both legs, a plausible figure.
                v = rtt[b] if a == coordinator_city else rtt[a] + rtt[b]
                out.append(f'"{a}-{b}" = {v:g}')
        return "\n".join(out) + "\n"


def draw_links(rng, cities, max_rtt_ms=120, min_mbps=10, max_mbps=100):
    """A WAN for `cities`: RTT, asymmetric bandwidth caps and jitter drawn per city."""
    links = []
    for c in cities:
        up = round(rng.uniform(min_mbps, max_mbps))
        links.append(Link(c, round(rng.uniform(2, max_rtt_ms)), up, round(rng.uniform(up, max_mbps)),
                          round(rng.uniform(0, 3), 1)))
    return links


def coordinator_kill_points(seed, phases=COORDINATOR_PHASES, per_phase=1, extra=0, first_round=1, rounds=None, cities=()):
    """Every phase `per_phase` times and `extra` phases drawn once more, one crash per round,
    rounds drawn from first_round..rounds (at least as many as crashes) without repetition,
    executed in round order. One
    crash per round keeps every planned point reachable: a round redone after a crash before its
    commit may close from the spool without another upload, so a second mid_upload there could
    never come. `cities`: also draw a WAN for these (delay and bandwidth; no partitions, which
    would hold sync rounds at their deadline)."""
    rng = random.Random(seed)
    points = [p for p in phases for _ in range(per_phase)] + rng.sample(list(phases), extra)
    n = len(points)
    rounds = rounds or first_round + n - 1
    assert rounds - first_round + 1 >= n, f"{n} crash points need {n} rounds, have {first_round}..{rounds}"
    rng.shuffle(points)
    chosen = sorted(rng.sample(range(first_round, rounds + 1), n))
    faults = [Fault("coordinator", r, p, "kill") for r, p in zip(chosen, points)]
    return FaultPlan(seed, faults, draw_links(rng, cities) if cities else [])


def node_faults(seed, nodes, rounds, actions=("kill",), pause_s=(0.5, 3.0), partitions=0, partition_len=(2, 4)):
    """One node fault per round 1..rounds: the node and the action (from `actions`) drawn per
    round, never the previous round's node (a node restarted a round ago may still be waiting for
    its old lease to expire before it can join again); stop_cont pauses drawn in pause_s. `partitions`: that many cut-offs of a node's link,
    each for a drawn number of rounds (needs the link emulator with its partitions file)."""
    rng = random.Random(seed)
    faults = []
    for r in range(1, rounds + 1):
        action = rng.choice(list(actions))
        pause = round(rng.uniform(*pause_s), 1) if action == "stop_cont" else 0.0
        last = faults[-1].process if faults else None
        faults.append(Fault(rng.choice([n for n in nodes if n != last]), r, "round_open", action, pause))
    parts = []
    for _ in range(partitions):
        length = rng.randint(*partition_len)
        start = rng.randint(1, max(1, rounds - length))
        parts.append(Partition(rng.choice(list(nodes)), start, start + length))
    return FaultPlan(seed, faults, partitions=sorted(parts, key=lambda p: p.from_round))


if __name__ == "__main__":
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    print(coordinator_kill_points(s, cities=["paris", "zurich", "dublin"]).describe())
    print(node_faults(s, ["n0", "n1", "n2", "n3"], 10, actions=ACTIONS, partitions=2).describe())
