#!/usr/bin/env python3
"""Mesh integration tests: real processes on loopback (coordinator, nodes, link emulator), tiny
model, seeded, bounded in time. One case per ctest entry:
    python3 tests/integration/test_mesh.py --meshrl build-mesh/meshrl --case four_nodes
Cases: four_nodes, split_codecs, ternary_mean_broadcast, partition_heal, node_killed, late_joiner, coordinator_crash, sync_async, fourteen_nodes,
mutual_tls.
MESHRL_KEEP_TEST_DIRS=1 keeps each case's logs and run directory.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mesh_harness import CONFIG, Mesh, run_cases  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))  # broadcast_trace
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))  # hf_reference

CITIES = ["paris", "zurich", "dublin", "toronto"]


def four_nodes(meshrl):
    """Four city nodes behind the four-cities link emulator complete the rounds; every node ends
    on the coordinator's final hash; nothing acknowledged is lost."""
    m = Mesh(meshrl, "four", ["--mesh.rounds=3"])
    m.start_coordinator()
    ports = m.start_emulator()
    for i, c in enumerate(CITIES):
        m.start_node(c, port=ports[c], shard=f"{i}/4")
    for c in CITIES:
        m.wait_exit(c, 240)
    assert m.version() == 3, m.version()
    m.check_hashes(CITIES)
    m.check_exactly_once(CITIES)
    m.close()


def split_codecs(meshrl):
    """[mesh] broadcast_codec: ternary updates up, int8 broadcasts down. Every stored broadcast is
    written with the broadcast's codec (the codec byte of its wire header), the updates stay a
    fraction of its size (about 1 bit a value against 8), and every node still reconstructs the
    coordinator's weights bit for bit."""
    names = ["paris", "zurich", "dublin"]
    m = Mesh(meshrl, "split", ["--mesh.rounds=3", "--mesh.codec=int2", "--mesh.broadcast_codec=int8"])
    m.start_coordinator()
    m.run_nodes(names)
    assert m.version() == 3, m.version()
    codecs = {1: "fp32", 2: "int8", 3: "int4", 4: "int2"}
    for v in range(1, 4):
        with open(os.path.join(m.run_dir, "versions", f"v-{v:06d}", "broadcast.bin"), "rb") as f:
            head = f.read(7)
        assert head[:4] == b"MRLU" and codecs.get(head[6]) == "int8", f"version {v}'s broadcast header {head!r}"
    # Largest against largest: an update of a step whose groups all scored alike is all zeros
    # (~2 KB in either codec), and so is a broadcast of a round of such updates.
    largest_broadcast = max(os.path.getsize(os.path.join(m.run_dir, "versions", f"v-{v:06d}", "broadcast.bin")) for v in range(1, 4))
    largest_update = m.query("select max(bytes) from updates")[0][0]
    assert largest_update * 2 < largest_broadcast, f"updates up to {largest_update} bytes, int8 broadcasts up to {largest_broadcast}"
    for n in names:
        assert "codec: got" not in m.read(n), m.read(n)
    m.check_hashes(names)
    acked = m.check_exactly_once(names)
    m.log(f"int2 up (at most {largest_update} bytes), int8 down (up to {largest_broadcast} bytes): {len(acked)} updates "
          "applied once, every node on the final hash")
    m.close()


def ternary_mean_broadcast(meshrl):
    """The demo's codec: absmax ternary updates up, ternary broadcasts with least-squares scales
    down ([mesh] broadcast_int2_scale = "mean", src/mesh/quantize.h). Two checks. First, the scales
    are what the option says. What the coordinator quantised for version v is what it sent plus
    what it kept: x = broadcast + residual after v (outer_state's ef/ tensors). Each block's scale
    must be the mean |x| over the values it sends, below their maximum (where absmax ternary would
    put it). Second, the design rests on the coordinator applying exactly the delta it sends:
    every node must reconstruct its weights bit for bit."""
    import numpy as np
    from broadcast_trace import decode_tensors
    from hf_reference import read_safetensors
    names = ["paris", "zurich", "dublin"]
    m = Mesh(meshrl, "tmean", ["--mesh.rounds=3", "--mesh.codec=int2", "--mesh.broadcast_int2_scale=mean",
                               "--mesh.block_size=2048"])
    m.start_coordinator()
    m.run_nodes(names)
    assert m.version() == 3, m.version()
    blocks = spread = 0
    for v in range(1, 4):  # version 1 may be all zeros: every group of the warm start can score alike
        vdir = os.path.join(m.run_dir, "versions", f"v-{v:06d}")
        codec, _, tensors = decode_tensors(os.path.join(vdir, "broadcast.bin"))
        assert codec == "int2", f"version {v}'s broadcast is {codec}"
        ef = read_safetensors(os.path.join(vdir, "outer_state.safetensors"))
        for name, bs, scales, b in tensors:
            x = b + ef["ef/" + name].numpy().reshape(-1).astype(np.float64)
            for k, s in enumerate(scales):
                sent = np.abs(x[k * bs:(k + 1) * bs][b[k * bs:(k + 1) * bs] != 0])
                if sent.size == 0:
                    assert s == 0, f"version {v} {name} block {k}: nothing sent but scale {s}"
                    continue
                blocks += 1
                assert abs(s - sent.mean()) <= 1e-5 * sent.mean(), \
                    f"version {v} {name} block {k}: scale {s}, mean |x| sent {sent.mean()}"
                if sent.max() > sent.min() * (1 + 1e-4):  # unequal magnitudes: the mean is below the max
                    spread += 1
                    assert s < sent.max() * (1 - 1e-6), f"version {v} {name} block {k}: scale {s} is the max"
    assert spread > 100, f"only {spread} of {blocks} blocks sent unequal magnitudes"
    m.check_hashes(names)
    acked = m.check_exactly_once(names)
    m.log(f"int2 up, least-squares int2 down: {blocks} blocks at their mean sent magnitude ({spread} below the max); "
          f"{len(acked)} updates applied once, every node on the final hash")
    m.close()


def partition_heal(meshrl):
    """toronto is partitioned for 5 rounds then healed (issue 5): the other three keep committing
    (quorum 0.75 of 4), toronto catches up on hash-checked versions and contributes again; every
    version is one more than the last, nothing is applied twice, all four end on the final hash."""
    # 5 rounds cut off, then headroom for toronto to reconnect (gRPC backs off up to 2 s, the node
    # up to 5 s), catch up, train and land an update before the run ends (measured: toronto was back
    # 1 to 3 rounds after the heal; about 2.2 s per round on a loaded 2-core machine). A CI run on
    # a loaded machine once needed 14 s from the heal to toronto's next upload (6 s to notice, 8 s to
    # rejoin, fetch, train and send) while 16 rounds left only 9 after the heal, so 24 leave ~17.
    # max_staleness 6: the three others close a round every ~2 s while toronto's round trip through
    # its 90 ms link and a loaded CPU can take several of theirs; its late updates must count
    # (staleness-weighted) rather than be refused as too old, or it never contributes again.
    rounds = 24
    m = Mesh(meshrl, "partition", [f"--mesh.rounds={rounds}", "--mesh.quorum=0.75", "--mesh.round_deadline_s=5",
                                   "--mesh.lease_s=3", "--mesh.max_staleness=6"])
    m.start_coordinator()
    ports = m.start_emulator(partitions=True)
    for i, c in enumerate(CITIES):
        m.start_node(c, port=ports[c], shard=f"{i}/4")

    def toronto_applied(min_base=0):
        return m.query(f"select count(*) from updates where node = 'toronto' and state = 1 and base_version >= {min_base}")[0][0]

    m.wait_for(lambda: toronto_applied() >= 1 and m.version() >= 1, 120, "an update of toronto applied")
    m.partition("toronto", True)
    t_cut, v_cut = time.time(), m.version()
    m.wait_for(lambda: m.version() >= v_cut + 5, 60, f"5 versions after {v_cut} without toronto")
    v_heal = m.version()
    t_heal = time.time()
    m.partition("toronto", False)
    assert v_heal < rounds, f"the run ended ({v_heal}) while toronto was cut off"
    m.log(f"versions {v_cut + 1}..{v_heal} committed while toronto was cut off")
    m.wait_for(lambda: toronto_applied(v_heal) >= 1, 60, f"an update of toronto on version >= {v_heal} applied")
    for c in CITIES:
        m.wait_exit(c, 120)
    assert m.version() == rounds, m.version()

    # While cut off: nothing from toronto reached the coordinator (0.5 s for an upload that
    # finished as the cut came), and every round of the partition was built by the other three.
    during = m.query(f"select count(*) from updates where node = 'toronto' and received_at > {t_cut + 0.5} "
                     f"and received_at < {t_heal}")[0][0]
    assert during == 0, f"{during} update(s) of toronto received while it was partitioned"
    for v, n, closed_by in m.query(f"select version, n_updates, closed_by from rounds where version > {v_cut} "
                                   f"and version <= {v_heal}"):
        others = m.query(f"select count(*) from updates where state = 1 and applied_version = {v} and node != 'toronto'")[0][0]
        assert n >= 1 and others >= 1, f"version {v} ({closed_by}) applied {n} update(s), {others} of the other nodes"
    # After healing: toronto trained on a version of the healed run (reached only through
    # hash-checked broadcasts or downloads) and the coordinator applied that update.
    bases = [b for (b,) in m.query(f"select base_version from updates where node = 'toronto' and state = 1 "
                                   f"and base_version >= {v_heal} order by base_version")]
    assert bases, "no update of toronto on a healed version was applied"
    events = [e for (e,) in m.query("select event from node_events where node = 'toronto'")]
    m.log(f"toronto's applied updates after healing are on versions {bases}; its events: {events}")
    # Every committed round raised the version by exactly one; each update applied at most once.
    versions = [v for (v,) in m.query("select version from rounds order by version")]
    assert versions == list(range(rounds + 1)), versions
    twice = m.query("select node, base_version, seq, count(*) from updates group by node, base_version, seq having count(*) > 1")
    assert not twice, f"updates recorded twice: {twice}"
    m.check_exactly_once(CITIES)
    m.check_hashes(CITIES)
    m.close()


def node_killed(meshrl):
    """A node SIGKILLed mid-round does not stop the round (its lease expires, quorum shrinks),
    and it rejoins under its name and ends on the final hash. dublin keeps its local state
    (--state-dir: residual, AdamW moments, step) and restores it when restarted."""
    names = ["paris", "zurich", "dublin"]
    m = Mesh(meshrl, "killed", ["--mesh.rounds=4", "--mesh.lease_s=3"])
    m.start_coordinator()
    state = ["--state-dir", os.path.join(m.dir, "dublin-state")]
    for n in names:
        m.start_node(n, extra=state if n == "dublin" else ())
    m.wait_for(lambda: m.version() >= 1, 120, "version 1")
    m.wait_for(lambda: m.pending() >= 1, 60, "round 2 under way")
    # dublin's state is written once the coordinator acknowledged one of its updates.
    m.wait_for(lambda: os.path.exists(os.path.join(m.dir, "dublin-state", "node-state.safetensors")), 60, "dublin's saved state")
    m.kill("dublin")
    # If dublin's update of this round slipped in before the kill, that round closes with it;
    # the next one can only close once dublin's lease has expired and the quorum shrinks to 2.
    v = m.version() + 1
    m.wait_for(lambda: m.version() >= v + 1, 60, f"version {v + 1}, built without dublin")
    without = m.query(f"select count(*) from updates where node = 'dublin' and applied_version = {v + 1}")[0][0]
    assert without == 0, "dublin was killed, yet contributed to a later version"
    events = [e for (e,) in m.query("select event from node_events where node = 'dublin'")]
    assert "lease_expired" in events, events
    m.start_node("dublin", extra=state)
    for n in names:
        m.wait_exit(n, 180)
    events = [e for (e,) in m.query("select event from node_events where node = 'dublin'")]
    assert "rejoin" in events, events
    restored = [line for line in m.read("dublin").splitlines() if "restored node state" in line]
    assert len(restored) == 1 and "AdamW moments of" in restored[0], restored
    m.check_hashes(names)
    m.check_exactly_once(names)
    m.close()


def late_joiner(meshrl):
    """A node joining at version k downloads version k (hash-checked) and trains from it."""
    # Rounds to spare after the join: a node that joins while the last round is closing has
    # nothing left to contribute to (seen: joined at 3 of 4, no update recorded). Two nodes close
    # a round of the tiny run in ~0.4 s while a new node process takes ~3 s to start and join, so
    # 6 rounds once ended before toronto joined (CI, joined at 6 of 6); 20 leave ~12 after it.
    m = Mesh(meshrl, "late", ["--mesh.rounds=20"])
    m.start_coordinator()
    for n in ["paris", "zurich"]:
        m.start_node(n)
    m.wait_for(lambda: m.version() >= 2, 120, "version 2")
    m.start_node("toronto")
    for n in ["paris", "zurich", "toronto"]:
        m.wait_exit(n, 180)
    log = m.read("toronto")
    import re
    k = int(re.search(r"joined run \w+ at version (\d+)", log).group(1))
    assert k >= 2, log
    assert f"downloaded version {k} " in log, log
    # It continues the run's lr schedule (k rounds of H = 1 inner step), not its own from step 0
    # at the peak lr while the others are further down the cosine.
    sched = re.search(r"inner schedule at step (\d+), where the run is", log)
    assert sched and int(sched.group(1)) >= k, f"toronto joined at version {k} without the run's schedule step: {log[:2000]}"
    bases = [b for (b,) in m.query("select base_version from updates where node = 'toronto'")]
    assert bases and min(bases) >= k, bases
    m.log(f"toronto joined at version {k}, its updates are on versions {sorted(set(bases))}")
    m.check_hashes(["paris", "zurich", "toronto"])
    m.check_exactly_once(["paris", "zurich", "toronto"])
    m.close()


def coordinator_crash(meshrl):
    """The coordinator SIGKILLed between rounds and mid-round resumes (--resume) at its last
    durable version: no acknowledged update lost or applied twice (checked from the ledger)."""
    names = ["paris", "zurich", "dublin"]
    m = Mesh(meshrl, "crash", ["--mesh.rounds=5"])
    m.start_coordinator()
    for n in names:
        m.start_node(n)
    # Between rounds: right after a version commits, before any update of the next round lands.
    m.wait_for(lambda: m.version() >= 1 and m.pending() == 0, 120, "version 1, nothing pending")
    m.kill("coordinator")
    v1 = m.version()
    m.start_coordinator(resume=True)
    # Mid-round: at least one acknowledged update waiting for the round to close.
    m.wait_for(lambda: m.version() >= v1 + 1, 120, "a version after the first restart")
    m.wait_for(lambda: m.pending() >= 1, 120, "an acknowledged update pending")
    pend = m.pending()
    m.kill("coordinator")
    m.log(f"killed mid-round with {pend} pending update(s) at version {m.version()}")
    m.start_coordinator(resume=True)
    for n in names:
        m.wait_exit(n, 240)
    m.wait_exit("coordinator", 60)
    assert m.version() == 5, m.version()
    acked = m.check_exactly_once(names)
    dup = sum(m.read(n).count("(duplicate)") for n in names)
    m.log(f"{dup} retried update(s) answered from the ledger")
    assert "resumed run" in m.read("coordinator")
    m.check_hashes(names)
    m.close()


def run_mode(meshrl, mode):
    names = ["paris", "zurich", "dublin"]
    # async: every update makes a version, so three nodes put each other up to ~3 versions behind.
    m = Mesh(meshrl, mode, ["--mesh.rounds=6", f"--mesh.mode={mode}", "--mesh.inner_steps=2", "--mesh.max_staleness=4"])
    m.start_coordinator(extra=["--eval"])
    m.run_nodes(names)
    m.wait_exit("coordinator", 120)
    with open(os.path.join(m.run_dir, "summary.json")) as f:
        s = json.load(f)
    m.check_hashes(names)
    m.check_exactly_once(names)
    # Each node logs its mean training reward with every update, in order.
    per_node = [[float(x) for x in re.findall(r"acknowledged, \d+ bytes, reward (\S+)", m.read(n))] for n in names]
    # In async mode every update makes a version, so fast nodes can use up the run's versions
    # before a slow starter's first update lands: such a node has no reward to report.
    per_node = [r for r in per_node if r]
    assert per_node, f"{mode}: no node had an update acknowledged"
    s["first_reward"] = sum(r[0] for r in per_node) / len(per_node)
    s["last_reward"] = sum(r[-1] for r in per_node) / len(per_node)
    every = [x for r in per_node for x in r]
    s["mean_reward"] = sum(every) / len(every)
    m.log(f"{mode}: pass@1 {s['pass_at_1_before']:.2f} -> {s['pass_at_1_after']:.2f} over {s['rounds']} versions, "
          f"node reward {s['first_reward']:.3f} -> {s['last_reward']:.3f}, mean {s['mean_reward']:.3f}")
    m.close()
    return s


def sync_async(meshrl):
    """Both modes run to the end with every node on the final hash, and the training reward does
    not collapse (the warm start sits near 0.7; a diverging outer loop drives it to 0 within a few
    rounds). STATUS: a weak criterion on purpose: the tiny model's RL recipe does not lift pass@1
    yet even on one node (README), and 16 samples a step make first-vs-last comparisons noise."""
    for mode in ["sync", "async"]:
        s = run_mode(meshrl, mode)
        assert s["mean_reward"] >= 0.25, (mode, s)


def fourteen_nodes(meshrl):
    """A realistic multi-city team: 14 nodes complete a few rounds on the tiny model."""
    names = [f"node{i:02d}" for i in range(14)]
    m = Mesh(meshrl, "fourteen", ["--mesh.rounds=2", "--grpo.prompts_per_step=2", "--mesh.lease_s=60",
                                  "--mesh.heartbeat_s=2", "--mesh.round_deadline_s=120"])
    m.start_coordinator()
    m.run_nodes(names, 280)
    assert m.version() == 2
    m.check_hashes(names)
    m.check_exactly_once(names)
    m.close()


def mutual_tls(meshrl):
    """The run CA through the CLI (`meshrl ca init/issue/revoke`), a coordinator requiring mutual
    TLS (--ca) and two nodes with their identities finish the rounds on the coordinator's hash
    (signed updates, applied exactly once). A revoked node and a node claiming another's name are
    refused and stop on their own, with nothing of theirs in the ledger; plaintext off loopback is
    refused before anything starts."""
    m = Mesh(meshrl, "tls", ["--mesh.rounds=2"])
    ca = os.path.join(m.dir, "ca")

    def cli(*args):
        r = subprocess.run([meshrl, *args], capture_output=True, text=True, timeout=120, env=m.env, cwd=m.dir)
        return r.returncode, r.stdout + r.stderr

    assert cli("ca", "init", ca)[0] == 0
    # The coordinator reads ca/; the key that admits nodes lives beside it (ca-key/), never inside.
    assert not os.path.exists(os.path.join(ca, "ca.key")) and os.path.exists(os.path.join(m.dir, "ca-key", "ca.key"))
    for n in ["paris", "zurich", "dublin"]:
        assert cli("ca", "issue", n, "--ca", ca)[0] == 0
    assert cli("ca", "revoke", "dublin", "--ca", ca)[0] == 0
    rc, out = cli("coordinator", "--insecure", "--listen", "0.0.0.0", "--port", "0", "--config", CONFIG)
    assert rc != 0 and "loopback" in out, out
    rc, out = cli("node", "--coordinator", "10.0.0.7:50051", "--name", "paris", "--insecure")
    assert rc != 0 and "loopback" in out, out

    m.start_coordinator(ca=ca)
    for i, n in enumerate(["paris", "zurich"]):
        m.start_node(n, shard=f"{i}/2", identity=os.path.join(ca, "nodes", n))
    m.start_node("dublin", identity=os.path.join(ca, "nodes", "dublin"))
    # paris's certificate under another name; its own key file, so that it does not race paris
    # writing ca/nodes/paris/signing.key (a flake seen in CI).
    m.start_node("toronto", identity=os.path.join(ca, "nodes", "paris"),
                 extra=["--signing-key", os.path.join(m.dir, "toronto-signing.key")])
    for n, why in [("dublin", "revoked"), ("toronto", "authenticated as 'paris'")]:
        rc = m.procs[n].wait(timeout=120)
        assert rc != 0 and why in m.read(n), f"{n} exited {rc}: {m.read(n)[-600:]}"
    for n in ["paris", "zurich"]:
        m.wait_exit(n, 240)
    assert m.version() == 2, m.version()
    m.check_hashes(["paris", "zurich"])
    m.check_exactly_once(["paris", "zurich"])
    assert m.query("select count(*) from node_events where node in ('dublin', 'toronto')")[0][0] == 0
    assert m.query("select count(*) from updates where node in ('dublin', 'toronto')")[0][0] == 0
    m.close()


if __name__ == "__main__":
    run_cases([four_nodes, split_codecs, ternary_mean_broadcast, partition_heal, node_killed, late_joiner, coordinator_crash, sync_async, fourteen_nodes, mutual_tls])
